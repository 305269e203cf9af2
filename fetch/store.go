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

import (
	"context"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Descriptor names one payload a store holds.
type Descriptor struct {
	Name     ref.Name
	Version  string
	Platform string // "any" or a platform tag
	Digest   digest.Digest
	Size     int64
	Origin   string // the store's address, e.g. oci://127.0.0.1:5000/murmur or oci-layout:/srv/store
	Title    string // the file name, e.g. grep-1.2.0.mur.zip
	// Private is set when the place needed the user's credentials to serve it: a private
	// repository, or a registry that asked for auth. A mirror only a project names never
	// receives it (mirror.go).
	Private bool
	// Versions, set when "latest" was resolved, are the versions the place listed for the name
	// (its tags, or its scope index's entries for the platform): what "latest" was chosen from.
	Versions []string
}

// Credentialed is implemented by a store that can say whether it sent the user's credentials.
type Credentialed interface {
	// Credentialed reports whether the store authenticated with the user's credentials.
	Credentialed() bool
}

// Store holds packed artifacts and answers by name, version and digest. It is not meant for
// implementations outside mur (see the package notes).
type Store interface {
	// String is the store's address as configured (oci://… or oci-layout:…).
	String() string
	// Resolve finds name@version for platform: the exact platform wins, then "any". A version of
	// "latest" means the highest semantic version among the store's tags. A miss is an error
	// carrying errs.NotFound.
	Resolve(ctx context.Context, name ref.Name, version, platform string) (Descriptor, error)
	// Open streams the payload with digest d from name's repository. The caller verifies; the
	// store does not need to. A miss is an error carrying errs.NotFound.
	Open(ctx context.Context, name ref.Name, d digest.Digest) (io.ReadCloser, error)
	// Push publishes a payload under desc's name, version and platform. It refuses, with
	// errs.LockConflict, a version the store already holds with another digest.
	Push(ctx context.Context, desc Descriptor, payload io.Reader) error
}

// Scratch is where a payload lands before it is checked: a CAS ingest that becomes visible only
// when the pull commits it. Writing into a Scratch is how a store or source "writes nothing" until
// every check has passed.
type Scratch interface {
	io.Writer
	io.ReaderAt
	// Size is the number of bytes written so far.
	Size() int64
	// Digest is the SHA-256 of everything written so far.
	Digest() digest.Digest
}

// Sourced describes a payload a Source fetched into a Scratch and checked.
type Sourced struct {
	Descriptor        // Origin is the source label, github:owner/repo
	Release    string // the release tag that carries the asset
	Asset      string // the asset's file name
	OwnerID    int64  // GitHub's numeric id of the repository's owner, already checked against the pin
	RepoID     int64
	// NewPin is set when the scope had no pin yet, so the caller records it in murmur.lock.
	NewPin *lock.ScopePin
}

// Source serves the artifacts of scopes from their publishers' releases. It is not meant for
// implementations outside mur (see the package notes).
type Source interface {
	// Label is github:owner/repo of the source serving scope, or false when none serves it.
	Label(scope string) (string, bool)
	// Resolve finds name@version (version may be "latest") for platform through the scope's
	// index and makes the checks that come before a download (the index is for the scope, the
	// repository's owner matches pin, which is nil when the lock holds no pin for the scope yet),
	// downloading nothing: the pipeline takes the payload from the CAS when it holds the digest.
	Resolve(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (Sourced, error)
	// Fetch resolves as Resolve does, downloads the payload into scratch, reading no more than
	// the index declares, and checks it (SPEC section 8) against the index.
	Fetch(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin, scratch Scratch) (Sourced, error)
}
