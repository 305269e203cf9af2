package ocistore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// AnnotationRefName names what an index.json entry of a layout is: acme/grep:1.2.0. One layout
// holds many repositories, so the name carries the repository as well as the tag.
const AnnotationRefName = "org.opencontainers.image.ref.name"

// LockFile is the file in a layout folder whose lock guards every change of index.json.
const LockFile = ".mur.lock"

// maxManifestBytes bounds how much of a manifest or index.json is read into memory.
const maxManifestBytes = 4 << 20

// layoutStore is a store in an OCI image-layout folder.
type layoutStore struct {
	addr  string // oci-layout:PATH as configured
	dir   string // PATH, absolute
	index indexCache
}

func openLayout(addr string) (store.Store, error) {
	p := strings.TrimPrefix(addr, schemeLayout)
	if p == "" {
		return nil, errs.New(errs.InvalidConfig, "store %q has no folder; write %s, e.g. oci-layout:/srv/murmur-store", addr, acceptedForms)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, errs.Wrap(err, errs.InvalidConfig, "store %q: can't make %q absolute: %v", addr, p, err)
	}
	return &layoutStore{addr: addr, dir: abs}, nil
}

func (s *layoutStore) String() string { return s.addr }

func (s *layoutStore) where(repo, tag string) string {
	if tag == "" {
		return fmt.Sprintf("%s (repository %s)", s.addr, repo)
	}
	return fmt.Sprintf("%s (ref %s:%s)", s.addr, repo, tag)
}

func (s *layoutStore) blobPath(h v1.Hash) string {
	return filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex)
}

// indexEntry is the part of an index.json entry mur reads. Entries and top-level fields are kept
// as raw JSON, so that a rewrite keeps whatever other tools put there.
type indexEntry struct {
	MediaType    types.MediaType   `json:"mediaType"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// layoutIndex is index.json as read. Its slices are shared by every reader of one reading
// (indexCache) and never changed; top is each reader's own, for writeIndex changes it.
type layoutIndex struct {
	top       map[string]json.RawMessage
	manifests []json.RawMessage
	entries   []indexEntry   // parallel to manifests
	byRef     map[string]int // the last entry of each ref name
}

// readIndex reads index.json; a missing one is an empty index, with exists false.
func (s *layoutStore) readIndex() (layoutIndex, bool, error) {
	path := filepath.Join(s.dir, "index.json")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return layoutIndex{top: map[string]json.RawMessage{}}, false, nil
	}
	if err != nil {
		return layoutIndex{}, false, errs.Wrap(err, errs.IO, "%s: reading index.json: %v", s.addr, err)
	}
	defer f.Close()
	stamp := ""
	if fi, err := f.Stat(); err == nil {
		stamp = safefile.Stamp(fi)
	}
	if idx, ok := s.index.get(stamp); ok {
		return idx, true, nil
	}
	raw, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return layoutIndex{}, false, errs.Wrap(err, errs.IO, "%s: reading index.json: %v", s.addr, err)
	}
	idx := layoutIndex{top: map[string]json.RawMessage{}}
	if err := json.Unmarshal(raw, &idx.top); err != nil {
		return layoutIndex{}, false, errs.Wrap(err, errs.Integrity, "%s: index.json is not a JSON object (%v); expected an OCI image index; restore it or remove the folder", s.addr, err)
	}
	if m, ok := idx.top["manifests"]; ok && string(m) != "null" {
		if err := json.Unmarshal(m, &idx.manifests); err != nil {
			return layoutIndex{}, false, errs.Wrap(err, errs.Integrity, "%s: index.json's manifests is not a list (%v); restore it or remove the folder", s.addr, err)
		}
	}
	for i, m := range idx.manifests {
		var e indexEntry
		if err := json.Unmarshal(m, &e); err != nil {
			return layoutIndex{}, false, errs.Wrap(err, errs.Integrity, "%s: entry %d of index.json does not parse (%v); restore it or remove the entry", s.addr, i, err)
		}
		idx.entries = append(idx.entries, e)
	}
	idx.byRef = make(map[string]int, len(idx.entries))
	for i, e := range idx.entries {
		if r := e.Annotations[AnnotationRefName]; r != "" {
			idx.byRef[r] = i // the last entry of a ref name is the one that counts
		}
	}
	s.index.put(stamp, idx)
	return idx, true, nil
}

func (idx layoutIndex) find(refName string) (indexEntry, bool) {
	if i, ok := idx.byRef[refName]; ok {
		return idx.entries[i], true
	}
	return indexEntry{}, false
}

// lookup finds repo:tag. A layout holds two conventions of ref name: mur's (and oras
// --oci-layout-path's) repo:tag, and the bare tag that `oras push --oci-layout DIR:TAG` writes.
// A bare tag says nothing of the repository, so it counts only when the artifact's own manifest
// (or index) names repo in its dev.murmur.artifact.name annotation.
func (s *layoutStore) lookup(idx layoutIndex, repo, tag string) (indexEntry, bool) {
	if e, ok := idx.find(repo + ":" + tag); ok {
		return e, true
	}
	for i := len(idx.entries) - 1; i >= 0; i-- {
		e := idx.entries[i]
		if e.Annotations[AnnotationRefName] == tag && s.names(e) == repo {
			return e, true
		}
	}
	return indexEntry{}, false
}

// names is the artifact name that entry e's own manifest or index carries, or "".
func (s *layoutStore) names(e indexEntry) string {
	raw, err := s.readBlob(s.addr, e.Digest, e.Size)
	if err != nil {
		return ""
	}
	var doc struct {
		Annotations map[string]string `json:"annotations"`
	}
	if json.Unmarshal(raw, &doc) != nil {
		return ""
	}
	return doc.Annotations[annotationName]
}

// refsHeld lists index.json's ref names for a not-found message, so that a user who typed the
// wrong convention or version sees what is there.
func (idx layoutIndex) refsHeld() string {
	var refs []string
	unnamed := 0
	for _, e := range idx.entries {
		if r := e.Annotations[AnnotationRefName]; r != "" {
			refs = append(refs, r)
		} else {
			unnamed++
		}
	}
	sort.Strings(refs)
	const shown = 20
	out := ""
	switch {
	case len(refs) == 0:
		out = "no ref names"
	case len(refs) > shown:
		out = fmt.Sprintf("the refs %s and %d more", strings.Join(refs[:shown], ", "), len(refs)-shown)
	default:
		out = "the refs " + strings.Join(refs, ", ")
	}
	if unnamed > 0 {
		what := "entries"
		if unnamed == 1 {
			what = "entry"
		}
		out += fmt.Sprintf(" (and %d %s without %s, which only a digest can address)", unnamed, what, AnnotationRefName)
	}
	return out
}

// readBlob reads a small blob whole and checks it against its descriptor.
func (s *layoutStore) readBlob(where string, dgst string, size int64) ([]byte, error) {
	h, err := v1.NewHash(dgst)
	if err != nil || h.Algorithm != "sha256" {
		return nil, errs.New(errs.Integrity, "%s: digest %q is not a sha256 digest", where, dgst)
	}
	if size < 0 || size > maxManifestBytes {
		return nil, errs.New(errs.Integrity, "%s: manifest %s claims %d bytes; expected at most %d", where, dgst, size, maxManifestBytes)
	}
	f, err := os.Open(s.blobPath(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.Integrity, "%s: blob %s is missing from the layout; re-push the version", where, dgst)
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "%s: reading blob %s: %v", where, dgst, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "%s: reading blob %s: %v", where, dgst, err)
	}
	if int64(len(raw)) != size || sha256Hash(raw) != h {
		return nil, errs.New(errs.Integrity, "%s: blob %s holds %d bytes hashing to %s; expected %d bytes with that digest; the layout is damaged; re-push the version", where, dgst, len(raw), sha256Hash(raw), size)
	}
	return raw, nil
}

// root implements manifestReader.
func (s *layoutStore) root(_ context.Context, repo, tag string) (types.MediaType, []byte, error) {
	idx, exists, err := s.readIndex()
	if err != nil {
		return "", nil, err
	}
	where := s.where(repo, tag)
	if !exists {
		return "", nil, errs.New(errs.NotFound, "%s: the folder holds no OCI layout (no index.json); push there first or check the path", where)
	}
	e, ok := s.lookup(idx, repo, tag)
	if !ok {
		return "", nil, errs.New(errs.NotFound, "%s: no ref %s:%s (nor a bare tag %s naming %s) in index.json, which holds %s; check the name and version, or push it there first", where, repo, tag, tag, repo, idx.refsHeld())
	}
	raw, err := s.readBlob(where, e.Digest, e.Size)
	if err != nil {
		return "", nil, err
	}
	return e.MediaType, raw, nil
}

// child implements manifestReader.
func (s *layoutStore) child(_ context.Context, repo string, c v1.Descriptor) ([]byte, error) {
	return s.readBlob(s.where(repo, ""), c.Digest.String(), c.Size)
}

// tags lists the tags of repo in index.json.
func (s *layoutStore) tags(repo string) ([]string, error) {
	idx, _, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	var tags []string
	seen := map[string]bool{}
	for _, e := range idx.entries {
		name := e.Annotations[AnnotationRefName]
		t, ok := strings.CutPrefix(name, repo+":")
		if !ok && name != "" && !strings.ContainsAny(name, ":/") && s.names(e) == repo {
			t, ok = name, true
		}
		if ok && !seen[t] {
			seen[t] = true
			tags = append(tags, t)
		}
	}
	return tags, nil
}

func (s *layoutStore) Resolve(ctx context.Context, n ref.Name, version, platform string) (store.Descriptor, error) {
	repo := n.String()
	tag := ref.TagFromVersion(version)
	var listed []string
	if version == ref.Latest {
		tags, err := s.tags(repo)
		if err != nil {
			return store.Descriptor{}, err
		}
		if tag, err = latestTag(s.where(repo, ""), n, tags); err != nil {
			return store.Descriptor{}, explainMiss(err, s.addr, n, version, func() ([]string, error) { return tags, nil }, s.artifactNames)
		}
		listed = listedVersions(tags)
	} else if err := ref.ValidateVersion(version); err != nil {
		return store.Descriptor{}, err
	}
	d, _, err := resolveTag(ctx, s, repo, tag, n, version, platform)
	if err != nil {
		return store.Descriptor{}, explainMiss(err, s.addr, n, version, func() ([]string, error) { return s.tags(repo) }, s.artifactNames)
	}
	// The payload is read later, by digest; a blob that is missing or cut short is worth
	// reporting now, while the name and version are at hand.
	if err := s.checkBlobSize(s.where(repo, tag), d.Digest, d.Size); err != nil {
		return store.Descriptor{}, err
	}
	d.Origin, d.Versions = s.addr, listed
	return d, nil
}

func (s *layoutStore) checkBlobSize(where string, d digest.Digest, size int64) error {
	fi, err := os.Stat(s.blobPath(toHash(d)))
	if errors.Is(err, fs.ErrNotExist) {
		return errs.Wrap(err, errs.Integrity, "%s: the payload blob %s is missing from the layout; re-push the version", where, d)
	}
	if err != nil {
		return errs.Wrap(err, errs.IO, "%s: %v", where, err)
	}
	if fi.Size() != size {
		return errs.New(errs.Integrity, "%s: the payload blob %s holds %d bytes; expected %d; the layout is damaged; re-push the version", where, d, fi.Size(), size)
	}
	return nil
}

// payloadSize is the size that n's manifests give for payload d, or -1 when none names it.
func (s *layoutStore) payloadSize(ctx context.Context, n ref.Name, d digest.Digest) int64 {
	tags, err := s.tags(n.String())
	if err != nil {
		return -1
	}
	for _, tag := range payloadTags(tags) {
		tc, err := readTag(ctx, s, n.String(), tag)
		if err != nil {
			continue
		}
		for _, c := range tc.children {
			if got, err := tc.load(ctx, s, n.String(), tag, c, n, ref.VersionFromTag(tag)); err == nil && got.Digest == d {
				return got.Size
			}
		}
	}
	return -1
}

func (s *layoutStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	if _, err := ref.ParseDigest(d.String()); err != nil {
		return nil, err
	}
	where := s.where(n.String(), "")
	f, err := os.Open(s.blobPath(toHash(d)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.NotFound, "%s: blob %s is not in the layout", where, d)
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "%s: opening blob %s: %v", where, d, err)
	}
	// Blobs are written whole or not at all, so a size that differs from the manifest's means
	// the folder was damaged from outside; the caller's hash would catch it too, but later.
	if want := s.payloadSize(ctx, n, d); want >= 0 {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, errs.Wrap(err, errs.IO, "%s: %v", where, err)
		}
		if fi.Size() != want {
			f.Close()
			return nil, errs.New(errs.Integrity, "%s: blob %s holds %d bytes; its manifest says %d; the layout is damaged; re-push the version", where, d, fi.Size(), want)
		}
	}
	return f, nil
}
