// Package fetch pulls packed artifacts from stores (OCI registries and OCI image-layout folders)
// and sources (the GitHub releases of a scope), and checks every byte on the way in.
//
// # Files
//
//   - store.go: Store, Source, Scratch, Descriptor; filestore.go: the file:// store.
//   - pull.go: Puller, Pull and one artifact's pull; pull_resolve.go: the lock's pin, the places
//     a request asks in order and what each answered; pull_commit.go: checking, committing,
//     pinning and recording; pull_batch.go: the group commit; pull_once.go: what a pull does once
//     for all its requests; pull_slots.go: the bounds on metadata requests in flight;
//     events.go: the progress a pull reports; kept.go: what a failed download kept for the next.
//   - download.go: the seam to fetch/internal/download, which moves the bytes (resume, parallel
//     ranges, the one reading of a Range answer); download_bound.go: the ceiling of a download
//     whose size no one declared; chain.go: when a failing store falls through;
//     integrity_summary.go: the closing warning about stores that served bad bytes;
//     mirror.go: the write-through to a mirror.
//   - pull_provenance.go, pull_bundles_early.go: Sigstore bundles found and checked as a pull
//     runs; config_provenance.go: the provenance keys of config.yaml.
//   - offline_latest.go: "latest" resolved offline from the version list an online pull kept.
//   - stage.go, stage_root.go, stage_sweep.go, streamstage.go: tools/ (through held folder
//     handles), the leftovers of killed stagings, and staging a payload as it downloads;
//     payload.go: reading a packed artifact back from the CAS (artifact.OpenBlob).
//   - project.go: a project opened for the commands that pull (OpenProject, Workspace.Puller);
//     project_sync.go, intent_check.go: murmur.lock following murmur.yaml; lockonly.go: `mur lock`.
//   - verify.go, verify_provenance.go: `mur verify`; warm.go, warm_bundles.go: `mur warm`;
//     publish.go, publish_bundles.go, publish_manifest.go: `mur push`; gc.go: `mur cache gc`;
//     outdated.go: `mur outdated`; list.go, info.go: `mur ls` and `mur info`; outside.go: a pull
//     outside a project (-o).
//   - config.go and store_address.go: config.yaml and the store address grammar.
//
// # Notes
//
//   - Store and Source are implemented inside mur (fetch/ocistore, fetch/github, FileStore), and
//     outside implementations are not intended: their signatures use mur's internal names
//     (internal/ref.Name) and their errors carry internal/errs tokens.
package fetch
