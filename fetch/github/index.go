package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// IndexAssetName is the asset of a scope's latest release that lists its artifacts.
const IndexAssetName = "murmur-index.json"

// IndexVersion is the only index_version mur reads and writes.
const IndexVersion = 1

// Index is a scope's murmur-index.json (SPEC section 8).
type Index struct {
	IndexVersion int          `json:"index_version"`
	Scope        string       `json:"scope"`
	Artifacts    []IndexEntry `json:"artifacts"`
}

// IndexEntry names one payload and where it is released.
type IndexEntry struct {
	Name     string `json:"name"`     // scoped, e.g. acme/grep
	Version  string `json:"version"`  // exact
	Platform string `json:"platform"` // any or a platform tag
	Release  string `json:"release"`  // the release tag that carries the asset
	Asset    string `json:"asset"`    // the asset's file name
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"` // 64 lowercase hex
	// Published is when the entry was first indexed, RFC 3339 in UTC. Update bots read it
	// (Renovate's minimumReleaseAge); mur itself does not, and indexes written before it existed
	// lack it.
	Published string `json:"published,omitempty"`
}

func (e IndexEntry) key() string { return e.Name + "@" + e.Version + " " + e.Platform }

// ParseIndex reads a murmur-index.json strictly: index_version 1, a valid scope, and entries whose
// names belong to it, with valid versions and platforms, a release and asset, a positive size, a
// 64-hex SHA-256 and no duplicate name, version and platform. Every refusal is errs.IndexMismatch
// naming the entry at fault.
func ParseIndex(data []byte) (*Index, error) {
	var raw struct {
		IndexVersion *int          `json:"index_version"`
		Scope        *string       `json:"scope"`
		Artifacts    *[]IndexEntry `json:"artifacts"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, errs.Wrap(err, errs.IndexMismatch, "the index's field %s holds a JSON %s where the index format wants a %s; the publisher must regenerate it with mur index", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return nil, errs.Wrap(err, errs.IndexMismatch, "the index is not valid JSON (%v); the publisher must regenerate it with mur index", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.New(errs.IndexMismatch, "the index has data after its JSON object; the publisher must regenerate it with mur index")
	}
	switch {
	case raw.IndexVersion == nil:
		return nil, errs.New(errs.IndexMismatch, "the index has no index_version; mur reads index_version %d", IndexVersion)
	case *raw.IndexVersion != IndexVersion:
		return nil, errs.New(errs.IndexMismatch, "the index has index_version %d; this mur reads only index_version %d, so upgrade mur or ask the publisher for a version %d index", *raw.IndexVersion, IndexVersion, IndexVersion)
	case raw.Scope == nil:
		return nil, errs.New(errs.IndexMismatch, "the index has no scope")
	case raw.Artifacts == nil:
		return nil, errs.New(errs.IndexMismatch, "the index for scope %q has no artifacts list", *raw.Scope)
	}
	if err := ref.ValidateSegment(*raw.Scope); err != nil {
		return nil, errs.New(errs.IndexMismatch, "the index's scope is not a valid scope: %s", errs.Message(err))
	}
	ix := &Index{IndexVersion: IndexVersion, Scope: *raw.Scope, Artifacts: *raw.Artifacts}
	if err := ix.validate(); err != nil {
		return nil, err
	}
	return ix, nil
}

func (ix *Index) validate() error {
	seen := make(map[string]bool, len(ix.Artifacts))
	for i, e := range ix.Artifacts {
		if err := validateEntry(ix.Scope, e); err != nil {
			return errs.New(errs.IndexMismatch, "index for scope %q, artifact %d (%s@%s %s): %s", ix.Scope, i+1, e.Name, e.Version, e.Platform, err)
		}
		if seen[e.key()] {
			return errs.New(errs.IndexMismatch, "index for scope %q lists %s@%s for platform %s twice; each name, version and platform may appear once", ix.Scope, e.Name, e.Version, e.Platform)
		}
		seen[e.key()] = true
	}
	return nil
}

func validateEntry(scope string, e IndexEntry) error {
	n, err := ref.ParseName(e.Name)
	if err != nil {
		return fmt.Errorf("name: %s", errs.Message(err))
	}
	if n.Scope != scope {
		return fmt.Errorf("name %s belongs to scope %q, not to the index's scope %q", e.Name, n.Scope, scope)
	}
	if err := ref.ValidateVersion(e.Version); err != nil {
		return fmt.Errorf("version: %s", errs.Message(err))
	}
	if err := ref.ValidatePlatform(e.Platform); err != nil {
		return fmt.Errorf("platform: %s", errs.Message(err))
	}
	if e.Release == "" {
		return fmt.Errorf("release is empty")
	}
	if e.Asset == "" || strings.ContainsAny(e.Asset, "/\\") {
		return fmt.Errorf("asset %q is not a file name", e.Asset)
	}
	if e.Size <= 0 {
		return fmt.Errorf("size %d is not positive", e.Size)
	}
	if !isHex64(e.SHA256) {
		return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", e.SHA256)
	}
	if e.Published != "" {
		if _, err := time.Parse(time.RFC3339, e.Published); err != nil {
			return fmt.Errorf("published %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", e.Published)
		}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Marshal writes the index deterministically: entries sorted by name, version and platform,
// two-space indentation and a final newline.
func (ix *Index) Marshal() []byte {
	out := Index{IndexVersion: IndexVersion, Scope: ix.Scope, Artifacts: append([]IndexEntry{}, ix.Artifacts...)}
	sort.Slice(out.Artifacts, func(i, j int) bool {
		a, b := out.Artifacts[i], out.Artifacts[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Platform < b.Platform
	})
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		panic(err) // plain strings and integers always marshal
	}
	return append(data, '\n')
}

// Lookup finds name (scoped) at version for platform: the exact platform wins, then "any"; a
// payload for another platform is never used. A version of "latest" (any case) means the highest
// semantic version that serves the platform; versions that are not semantic versions are skipped.
func (ix *Index) Lookup(name, version, platform string) (IndexEntry, bool) {
	if strings.EqualFold(version, ref.Latest) {
		var versions []string
		for _, e := range ix.Artifacts {
			if e.Name == name && (e.Platform == platform || e.Platform == ref.PlatformAny) {
				versions = append(versions, e.Version)
			}
		}
		v, ok := ref.HighestSemver(versions)
		if !ok {
			return IndexEntry{}, false
		}
		version = v
	}
	var anyEntry IndexEntry
	found := false
	for _, e := range ix.Artifacts {
		if e.Name != name || e.Version != version {
			continue
		}
		if e.Platform == platform {
			return e, true
		}
		if e.Platform == ref.PlatformAny {
			anyEntry, found = e, true
		}
	}
	return anyEntry, found
}

// Merge adds other's entries to ix. An entry for the same name, version and platform replaces
// the old one when the SHA-256 is the same, keeping the old published time (the version was
// out since then; a later time would hold it back from update bots again); a different SHA-256
// is refused with errs.IndexMismatch, because a published version never changes. Indexes of
// different scopes don't merge.
func (ix *Index) Merge(other *Index) error {
	if other.Scope != ix.Scope {
		return errs.New(errs.IndexMismatch, "can't merge an index for scope %q into one for scope %q", other.Scope, ix.Scope)
	}
	pos := make(map[string]int, len(ix.Artifacts))
	for i, e := range ix.Artifacts {
		pos[e.key()] = i
	}
	merged := append([]IndexEntry{}, ix.Artifacts...)
	for _, e := range other.Artifacts {
		i, ok := pos[e.key()]
		if !ok {
			pos[e.key()] = len(merged)
			merged = append(merged, e)
			continue
		}
		if merged[i].SHA256 != e.SHA256 {
			return errs.New(errs.IndexMismatch, "the index already lists %s@%s for %s with sha256 %s, and the new entry has sha256 %s; a published version can't change, so publish a new version", e.Name, e.Version, e.Platform, merged[i].SHA256, e.SHA256)
		}
		if merged[i].Published != "" {
			e.Published = merged[i].Published
		}
		merged[i] = e
	}
	ix.Artifacts = merged
	return nil
}

// versionsOf lists the versions the index has for name, with their platforms, for messages.
func (ix *Index) versionsOf(name string) []string {
	var out []string
	for _, e := range ix.Artifacts {
		if e.Name == name {
			out = append(out, e.Version+" ("+e.Platform+")")
		}
	}
	sort.Strings(out)
	return out
}
