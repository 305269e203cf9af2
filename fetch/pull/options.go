package pull

import (
	"context"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/store"
)

// Limits bound what a pull has in flight and how it fetches a large blob.
type Limits struct {
	Jobs int // slots of bytes in flight (download.Slots); <1 means 4
	// MetaJobs bounds the metadata requests (manifests, tags, release lookups) in flight at once,
	// apart from Jobs: every request of a pull resolves at once; <1 means DefaultMetaJobs.
	MetaJobs int
	// Connections is how many connections one large blob is fetched over when its server
	// serves ranges; <1 means DefaultConnections, 1 fetches every blob as one stream. Each
	// connection beyond a blob's first takes a free job slot, so Jobs bounds them all.
	Connections int
	// ParallelMin is the size from which a blob is fetched over several connections; <=0 means
	// DefaultParallelMin.
	ParallelMin int64
	// Chunk is the piece one connection asks for at a time; <=0 means DefaultChunk.
	Chunk int64
	// MaxDecompressed bounds what the payloads one pull stages into tools/ decompress to
	// together (config.yaml's pull.max_decompressed); <=0 means stage.DefaultMaxPullDecompressed.
	// MURMUR_MAX_PULL_DECOMPRESSED_BYTES overrides it (stage.MaxPullDecompressed).
	MaxDecompressed int64
	// Hooks change the download engine's decisions (tests and benchmarks); nil for its own.
	Hooks *download.Hooks
}

// Chain says how the stores are tried in order (chain.go).
type Chain struct {
	// Fallbacks says, by store address, when a failure of a store falls through to the next
	// place; a store not named has FallbackNotFound.
	Fallbacks map[string]store.Fallback
	// Health remembers which stores failed, so that each costs its timeout once; nil makes
	// Pull keep its own.
	Health *StoreHealth
}

// Mirror is the write-through mirror (mirror.go).
type Mirror struct {
	// Store, when set, receives every artifact a pull brings in from anywhere else. A failed
	// push is a warning, unless Required.
	Store    store.Store
	Required bool
	// FromProject is set when only the project's .murmur/config.yaml names the mirror, not
	// the home's config.yaml or --mirror: a cloned project's choice, which never receives an
	// artifact fetched with the user's credentials, and receives only what came from
	// ProjectStores (the stores only the project names) or from a public source.
	FromProject   bool
	ProjectStores map[string]bool
}

// Provenance is how a pull checks Sigstore bundles (provenance.go).
type Provenance struct {
	// Verifier checks bundles (provenance.Helper runs mur-provenance); nil checks none, and
	// then refuses only to pull a pin that recorded provenance.
	Verifier provenance.Verifier
	// Policy is each scope's provenance policy (config.Config.ProvenanceFor); nil is prefer
	// with the embedded roots. Override is --provenance, over every scope's.
	Policy   func(scope string) config.ProvenancePolicy
	Override string
}

// Compile is how a pull precompiles what it brings in.
type Compile struct {
	// Precompile compiles a fresh payload into the compiled cache; nil skips. A failure is a
	// warning: the blob is pinned and valid, and `mur run` reports why it can't execute it. wasm
	// is mapped from a file (stage.ReadBlob) and unmapped once Precompile returns, unless ctx has
	// ended by then: it may be read past the return only by a compile that ctx cut short.
	Precompile func(ctx context.Context, wasm []byte) error
	// Cache, when set with Precompile, tells which payloads the compiled cache holds already,
	// by a key the pull computes as it streams the payload anyway; those are not read back or
	// compiled again.
	Cache CompiledCache
}

// Report is where a pull says what it is doing.
type Report struct {
	Events func(Event)
	// Warn reports what went wrong without failing the pull; nil drops it.
	Warn func(msg string)
}
