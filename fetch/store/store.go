// Package store is the contract between the pull and what it pulls from: a Store (an OCI
// registry, an OCI image-layout folder, a file) that resolves and serves blobs by digest, a
// Source (the GitHub releases of a scope) that resolves through an index, the Descriptor both
// answer with, and the optional abilities some have (BundleFinder, BundleAttacher,
// ManifestAddresser). It also holds the store-address grammar of config.yaml and --store.
//
// fetch/ocistore and fetch/github implement it and import nothing else of fetch, so the pull
// pipeline and the stores can change apart.
package store

import (
	"context"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
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

// Fallback says when a failure of a store falls through to the next place.
type Fallback string

// The fallbacks a store entry may name.
const (
	FallbackNotFound Fallback = "not-found"
	FallbackAnyError Fallback = "any-error"
)

// ParseFallback reads a fallback as config.yaml writes it.
func ParseFallback(s string) (Fallback, error) {
	switch f := Fallback(strings.TrimSpace(s)); f {
	case FallbackNotFound, FallbackAnyError:
		return f, nil
	}
	return "", errs.New(errs.Usage, "fallback %q is not one of not-found (fall through to the next store only when this one lacks the artifact) and any-error (fall through on any failure)", s)
}
