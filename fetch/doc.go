// Package fetch is the fetch tool's verbs on a project, as the Go command's modload is: Pull (of a
// project, or outside one), Add, Remove, Lock (and --bump), Outdated, Warm, Verify, GC, List and
// Info, and the rule that keeps murmur.lock following murmur.yaml. cmd/mur speaks to fetch only.
//
// # Files
//
//   - transition.go: the one transition of murmur.lock (Transition, writeLock, next), which every
//     command that changes the lock goes through; intent_check.go: murmur.yaml against the lock.
//   - puller.go: Puller, the pipeline (fetch/pull) as the verbs drive it, and the pipeline's
//     words (Project, Request, Result, Event) as the verbs hand them out; project.go: a project
//     opened with its config (OpenProject), and the one assembly of a command's Puller from its
//     PullerOptions (Workspace.Puller); open.go: how a command reaches registries and GitHub
//     (Network), and the one store it writes (OpenStore).
//   - project_sync.go: `mur pull` and `mur add` in a project, `mur rm` (Undeclare);
//     lockonly.go: `mur lock` and forget-scope; outdated.go: `mur outdated`.
//   - warm.go: `mur warm`; verify_verb.go: `mur verify` (fetch/verify does the checking);
//     gc.go: `mur cache gc`; list.go, info.go: `mur ls` and `mur info`; outside.go: a pull
//     outside a project (-o); integrity_summary.go: the closing warning about bad stores.
//
// # Beneath it
//
//   - fetch/pull: the pipeline: resolve, chain, download, check, commit, record, stage, precompile.
//   - fetch/store: the contract ocistore and github implement, and the store-address grammar.
//   - fetch/stage: tools/ through held folder handles. fetch/config: both config.yaml files.
//   - fetch/verify: the checker behind `mur verify`. fetch/publish: what `mur push` sends.
//   - fetch/provenance: facts, policy and the mur-provenance client; its sigstore sub-package is
//     the helper's side, the only importer of sigstore-go.
//   - fetch/ocistore, fetch/github: registries and layouts, GitHub releases.
//
// # Notes
//
//   - Store and Source are implemented inside mur (fetch/ocistore, fetch/github, FileStore), and
//     outside implementations are not intended: their signatures use mur's internal names
//     (internal/ref.Name) and their errors carry internal/errs tokens.
package fetch
