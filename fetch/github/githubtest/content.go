package githubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// AddRepo creates owner/repo with the given owner and repository ids.
func (s *Server) AddRepo(owner, name string, ownerID, repoID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[strings.ToLower(owner+"/"+name)] = &repo{owner: owner, name: name, ownerID: ownerID, repoID: repoID}
}

// AddRelease publishes a release with the given assets. The latest release is the last one added
// that is neither a draft nor a prerelease.
func (s *Server) AddRelease(owner, name, tag string, assets map[string][]byte) {
	s.t.Helper()
	s.addRelease(owner, name, tag, false, false, assets)
}

// AddDraftRelease adds a draft release, which GitHub hides from unauthenticated readers (404).
func (s *Server) AddDraftRelease(owner, name, tag string, assets map[string][]byte) {
	s.t.Helper()
	s.addRelease(owner, name, tag, true, false, assets)
}

// AddPrerelease adds a prerelease, which /releases/latest never answers with.
func (s *Server) AddPrerelease(owner, name, tag string, assets map[string][]byte) {
	s.t.Helper()
	s.addRelease(owner, name, tag, false, true, assets)
}

func (s *Server) addRelease(owner, name, tag string, draft, pre bool, assets map[string][]byte) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(owner, name)
	if r.release(tag) != nil {
		s.t.Fatalf("githubtest: release %s already exists in %s/%s", tag, owner, name)
	}
	rel := &release{id: s.id(), tag: tag, draft: draft, prerelease: pre}
	r.releases = append(r.releases, rel)
	names := make([]string, 0, len(assets))
	for n := range assets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s.addAssetLocked(r, rel, n, assets[n])
	}
}

// AddAsset attaches one more asset to an existing release, or replaces the asset of that name with
// a new upload (a new id, size and digest), as deleting and re-uploading does on GitHub.
func (s *Server) AddAsset(owner, name, tag, assetName string, data []byte) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(owner, name)
	rel := r.release(tag)
	if rel == nil {
		s.t.Fatalf("githubtest: no release %s in %s/%s", tag, owner, name)
	}
	for i, a := range rel.assets {
		if a.name == assetName {
			rel.assets = append(rel.assets[:i], rel.assets[i+1:]...)
			delete(s.assets, a.id)
			break
		}
	}
	s.addAssetLocked(r, rel, assetName, data)
}

func (s *Server) addAssetLocked(r *repo, rel *release, name string, data []byte) {
	sum := sha256.Sum256(data)
	a := &asset{
		id:          s.id(),
		tag:         rel.tag,
		name:        name,
		data:        bytes.Clone(data),
		size:        int64(len(data)),
		digest:      "sha256:" + hex.EncodeToString(sum[:]),
		contentType: contentTypeOf(name),
		owner:       r.owner,
		repo:        r.name,
	}
	rel.assets = append(rel.assets, a)
	s.assets[a.id] = a
}

func contentTypeOf(name string) string {
	switch {
	case strings.HasSuffix(name, ".json"):
		return "application/json"
	case strings.HasSuffix(name, ".zip"):
		return "application/zip"
	}
	return "application/octet-stream"
}

// SetOwnerID changes the numeric id of the repository's owner, as a transfer does.
func (s *Server) SetOwnerID(owner, name string, ownerID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoLocked(owner, name).ownerID = ownerID
}

// ReplaceAssetBytes swaps the bytes behind an asset under the same release tag and asset id. With
// keepAdvertised the asset's JSON still shows the old size and digest; without, it shows the new
// bytes' size and digest (only the publisher's index still tells the difference).
func (s *Server) ReplaceAssetBytes(owner, name, tag, assetName string, data []byte, keepAdvertised bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.assetLocked(owner, name, tag, assetName)
	a.data = bytes.Clone(data)
	if !keepAdvertised {
		sum := sha256.Sum256(data)
		a.size = int64(len(data))
		a.digest = "sha256:" + hex.EncodeToString(sum[:])
	}
}

// Advertise sets the size and digest an asset's JSON shows, without touching its bytes. A digest
// of "" omits the field, as GitHub does for assets uploaded before it computed digests.
func (s *Server) Advertise(owner, name, tag, assetName string, size int64, digest string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.assetLocked(owner, name, tag, assetName)
	a.size = size
	a.digest = digest
}

// AssetID is the id of a release's asset.
func (s *Server) AssetID(owner, name, tag, assetName string) int64 {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.assetLocked(owner, name, tag, assetName).id
}
