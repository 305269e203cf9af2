package githubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// PackArtifact builds the bytes of a .mur.zip holding murmur.yaml (bare name and version) and
// capsule.wasm (an empty module). The same arguments always give the same bytes.
func PackArtifact(bareName, version string) []byte {
	return artifacttest.Zip(bareName, version, nil)
}

// Artifact is one packed artifact as a publisher releases it.
type Artifact struct {
	Name     string // scoped, e.g. acme/grep
	Version  string
	Platform string // "" means any
	Release  string // the release tag that carries the asset
	Asset    string // the asset's file name
	Data     []byte // the .mur.zip bytes
}

// SHA256 is the bare hex digest of the artifact's bytes.
func (a Artifact) SHA256() string {
	sum := sha256.Sum256(a.Data)
	return hex.EncodeToString(sum[:])
}

// IndexEntry is one artifact of a murmur-index.json, in the index's own field order.
type IndexEntry struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
	Release  string `json:"release"`
	Asset    string `json:"asset"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// Entry is the index entry that describes a, with its real size and digest.
func (a Artifact) Entry() IndexEntry {
	p := a.Platform
	if p == "" {
		p = "any"
	}
	return IndexEntry{Name: a.Name, Version: a.Version, Platform: p, Release: a.Release, Asset: a.Asset, Size: int64(len(a.Data)), SHA256: a.SHA256()}
}

// IndexJSON is a murmur-index.json (SPEC section 8) for scope listing the given entries, as
// given: tests may pass entries that lie.
func IndexJSON(scope string, entries ...IndexEntry) []byte {
	if entries == nil {
		entries = []IndexEntry{}
	}
	data, err := json.MarshalIndent(struct {
		IndexVersion int          `json:"index_version"`
		Scope        string       `json:"scope"`
		Artifacts    []IndexEntry `json:"artifacts"`
	}{1, scope, entries}, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(data, '\n')
}

// Publish releases each artifact as an asset of its release (creating releases in the order they
// first appear), then attaches a murmur-index.json listing all of them to the latest release.
func (s *Server) Publish(owner, repo, scope string, arts ...Artifact) {
	s.t.Helper()
	entries := make([]IndexEntry, 0, len(arts))
	for _, a := range arts {
		s.mu.Lock()
		exists := s.repoLocked(owner, repo).release(a.Release) != nil
		s.mu.Unlock()
		if !exists {
			s.AddRelease(owner, repo, a.Release, nil)
		}
		s.AddAsset(owner, repo, a.Release, a.Asset, a.Data)
		entries = append(entries, a.Entry())
	}
	s.AttachIndex(owner, repo, IndexJSON(scope, entries...))
}

// AttachIndex attaches (or replaces) murmur-index.json on the latest release.
func (s *Server) AttachIndex(owner, repo string, index []byte) {
	s.t.Helper()
	s.mu.Lock()
	latest := s.repoLocked(owner, repo).latest()
	s.mu.Unlock()
	if latest == nil {
		s.t.Fatalf("githubfake: %s/%s has no release to attach an index to", owner, repo)
	}
	s.AddAsset(owner, repo, latest.tag, "murmur-index.json", index)
}
