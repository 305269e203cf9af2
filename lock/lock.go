// Package lock reads, changes and writes murmur.lock (SPEC section 6), version 3.
//
// The lock says what was pinned, never where it came from: a digest per artifact (one for any
// platform, or one per platform), who pinned it (origin), the verified provenance it was pinned
// with, if any, and, per scope, the source and the GitHub owner and repository ids seen at the
// first source pull. Where each blob came from is the pull records' business.
//
// Writing is deterministic, so that two machines pinning the same things write the same bytes:
// lock_version, scopes, artifacts in that order; scopes sorted by name, artifacts by name; inside
// a scope source, owner_id, repo_id; inside an entry name, resolved_version, sha256, origin,
// provenance; LF line ends and a trailing newline. Values that a YAML reader could take for
// anything but that string (a number, a boolean, null) are double-quoted.
//
// Every change goes through Update, which holds an exclusive OS file lock on a hidden sibling
// (GuardPath) across read, change and write, and writes through atomicfile, so concurrent pulls in
// one project lose no entry and a reader never sees a torn file.
//
// Decisions the SPEC leaves open:
//   - A missing murmur.lock is an empty lock. An existing but empty file is refused: mur never
//     writes one, so it is damage, not a fresh start.
//   - Unknown keys (at the top level, in a scope or in an entry) are ignored, reported in
//     Lock.Warnings, and dropped on the next write. Additions that an older mur may drop safely
//     may appear within lock_version 3; anything an older mur must not drop bumps lock_version,
//     which every other version of mur refuses.
//   - A lock pins one version per artifact name. Two entries with the same name are refused.
//   - Scope `local` is never pinned: its artifacts come from files and are asked of no source.
//     Scope `murmur` may be pinned, but only to github:murmur-nexus/default-artifacts, so that no
//     GitHub owner can claim it through a lock either.
//   - Upsert with update=true replaces what stands in the way: an entry of another version is
//     replaced whole (its other platforms' hashes belonged to that version), a different hash for
//     the same version and platform replaces just that hash (the other platforms keep theirs until
//     they are pulled with --update too), and any versus per-platform hashes replace each other.
//     Without update every such difference is a lock-conflict error.
//   - The file lock lives in `.murmur.lock.lck` beside murmur.lock; it holds no data, may be
//     deleted when no mur runs, and belongs in .gitignore.
//   - Update parses what it is about to write and refuses to write a lock it could not read back.
package lock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// Version is the lock_version this mur reads and writes.
const Version = 3

// FileName is the lock's name beside murmur.yaml.
const FileName = "murmur.lock"

// Origin says who pinned an entry: 1 to 64 of a-z, 0-9 and '-', starting with a letter. Other
// tools may pin with their own origin; mur itself only writes OriginOperator.
type Origin string

// OriginOperator is the default origin: pinned by the person or CI that runs mur.
const OriginOperator Origin = "operator"

// Lock is the content of murmur.lock.
type Lock struct {
	// Scopes holds each scope's owner pin, by scope name.
	Scopes map[string]ScopePin
	// Artifacts is kept sorted by name by Parse and Upsert.
	Artifacts []Entry
	// Warnings name what Parse ignored (unknown keys). They are never written.
	Warnings []string
}

// ScopePin is what the first source pull of a scope saw on GitHub.
type ScopePin struct {
	Source  string `json:"source"`   // github:OWNER/REPO
	OwnerID int64  `json:"owner_id"` // GitHub's numeric id of the repository's owner
	RepoID  int64  `json:"repo_id"`  // GitHub's numeric id of the repository
}

// Entry pins one artifact.
type Entry struct {
	Name            string // scope/name
	ResolvedVersion string
	SHA256          Hashes
	Origin          Origin // OriginOperator unless something else pinned it
	// Provenance is set once a pull verified the artifact's Sigstore bundle; from then on every
	// pull of the entry requires a verified bundle, from any store.
	Provenance *Provenance
}

// Provenance is what a verified bundle pinned: its kind, the bundle's own digest (the bundle is
// kept in the CAS) and who signed it.
type Provenance struct {
	Kind   string // ProvenanceGitHub or ProvenanceKey
	Bundle string // sha256:<hex> of the bundle
	Signer string // the signing workflow (the certificate's SAN), or the key's hint
}

// The kinds of provenance.
const (
	ProvenanceGitHub = "github-attestation"
	ProvenanceKey    = "key"
)

// SetProvenance records a verified bundle on name's entry.
func (l *Lock) SetProvenance(name string, p Provenance) error {
	e := l.Find(name)
	if e == nil {
		return errs.New(errs.Internal, "no entry %s to record provenance on", name)
	}
	if msg := describeProvenance(p); msg != "" {
		return errs.New(errs.Internal, "provenance of %s: %s", name, msg)
	}
	e.Provenance = &p
	return nil
}

func describeProvenance(p Provenance) string {
	switch {
	case p.Kind != ProvenanceGitHub && p.Kind != ProvenanceKey:
		return fmt.Sprintf("kind must be %s or %s, found %q", ProvenanceGitHub, ProvenanceKey, p.Kind)
	case !strings.HasPrefix(p.Bundle, "sha256:") || !isHex64(strings.TrimPrefix(p.Bundle, "sha256:")):
		return fmt.Sprintf("bundle must be sha256:<64 lowercase hex>, found %q", p.Bundle)
	case p.Signer == "" || len(p.Signer) > 1024:
		return "signer must be 1 to 1024 characters"
	}
	return ""
}

// Hashes holds exactly one of Any and Platforms. Hashes are lowercase hex, without "sha256:".
type Hashes struct {
	Any       string
	Platforms map[string]string // platform tag → hex; never has the key "any"
}

// MaxFileBytes caps what is read of a murmur.lock: a lock of thousands of artifacts is a few
// MiB, and a file far beyond that is not a lock.
const MaxFileBytes = 64 << 20

// GuardPath is the file Update locks for the lock at path: a hidden sibling, because the lock
// itself is replaced by rename and a lock on a replaced inode guards nothing.
func GuardPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lck")
}

// Read parses the lock at path. A missing file is an empty lock.
func Read(path string) (*Lock, error) {
	data, err := safefile.ReadProject(path, MaxFileBytes, errs.InvalidLock)
	if errors.Is(err, fs.ErrNotExist) {
		return &Lock{Scopes: map[string]ScopePin{}}, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Update reads the lock at path, lets fn change it and writes it back, all under an exclusive
// file lock, so that concurrent processes lose no change. If fn fails nothing is written and its
// error is returned as is. If the content is unchanged the file is not rewritten, and a missing
// lock that stays empty is not created.
//
// On a read-only file system (a checkout mounted read-only) the file lock can't be made, but
// nothing can write the lock there either: fn then runs on the lock as it is, and only a change
// is an error, so that a pull with nothing to do succeeds without writing.
func Update(ctx context.Context, path string, fn func(*Lock) error) error {
	_, err := UpdateFile(ctx, path, fn)
	return err
}

// UpdateFile is Update that also reports whether it wrote the file.
func UpdateFile(ctx context.Context, path string, fn func(*Lock) error) (wrote bool, err error) {
	unlock, err := lockedfile.Lock(ctx, GuardPath(path))
	if errs.TokenOf(err) == errs.Denied {
		return false, err
	}
	readOnly := errors.Is(err, syscall.EROFS)
	if err != nil && !readOnly {
		return false, errs.Wrap(err, errs.IO, "can't lock %s for writing: %v", path, err)
	}
	if readOnly {
		return false, updateReadOnly(path, fn, errs.Wrap(err, errs.IO, "can't lock %s for writing: %v; this change to it needs a writable checkout", path, err))
	}
	defer unlock()
	data, changed, err := apply(path, fn)
	if err != nil || !changed {
		return false, err
	}
	// fn may have edited the fields directly; a lock that mur itself could not read back would
	// stop every later command, so it is never written.
	if _, err := Parse(data, path); err != nil {
		return false, errs.Wrap(err, errs.Internal, "refusing to write %s, because the change would make it unreadable: %s; this is a bug in mur, please report it", path, errs.Message(err))
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.WriteFile(path, data, perm); err != nil {
		return false, errs.Wrap(err, errs.IO, "can't write %s: %v; check that its folder is writable and the disk is not full", path, err)
	}
	return true, nil
}

// Find returns the entry for name, or nil.
func (l *Lock) Find(name string) *Entry {
	i, ok := l.index(name)
	if !ok {
		return nil
	}
	return &l.Artifacts[i]
}

// index finds name by binary search when the artifacts are sorted, else by a scan.
func (l *Lock) index(name string) (int, bool) {
	i := sort.Search(len(l.Artifacts), func(i int) bool { return l.Artifacts[i].Name >= name })
	if i < len(l.Artifacts) && l.Artifacts[i].Name == name {
		return i, true
	}
	for j := range l.Artifacts {
		if l.Artifacts[j].Name == name {
			return j, true
		}
	}
	return i, false
}

// Digest is the pinned hash for platform: the exact platform wins, then "any". It never returns
// another platform's hash. pinnedPlatform says which one matched.
func (e *Entry) Digest(platform string) (hex, pinnedPlatform string, ok bool) {
	if platform != ref.PlatformAny {
		if h, found := e.SHA256.Platforms[platform]; found {
			return h, platform, true
		}
	}
	if e.SHA256.Any != "" {
		return e.SHA256.Any, ref.PlatformAny, true
	}
	return "", "", false
}

// Upsert pins name@version for platform to hex. A new artifact is added; a new platform of a
// pinned version merges into its Platforms; the same hash again changes nothing. Another version,
// another hash for a pinned platform, or mixing "any" with per-platform hashes is a lock-conflict
// error unless update is true, in which case the new pin replaces the old. An empty origin means
// OriginOperator.
func (l *Lock) Upsert(name, version, platform, hex string, origin Origin, update bool) error {
	if _, err := ref.ParseName(name); err != nil {
		return errs.Wrap(err, errs.Usage, "can't pin %q: %s", name, errs.Message(err))
	}
	if err := ref.ValidateVersion(version); err != nil {
		return errs.Wrap(err, errs.Usage, "can't pin %s: %s", name, errs.Message(err))
	}
	if err := ref.ValidatePlatform(platform); err != nil {
		return errs.Wrap(err, errs.Usage, "can't pin %s@%s: %s", name, version, errs.Message(err))
	}
	if !isHex64(hex) {
		return errs.New(errs.Usage, "can't pin %s@%s: hash %q is not 64 lowercase hex digits", name, version, hex)
	}
	if origin == "" {
		origin = OriginOperator
	}
	if !validOrigin(origin) {
		return errs.New(errs.Usage, "can't pin %s@%s: origin %q must be 1 to 64 of a-z, 0-9 and '-', starting with a letter", name, version, origin)
	}
	fresh := Entry{Name: name, ResolvedVersion: version, Origin: origin}
	if platform == ref.PlatformAny {
		fresh.SHA256.Any = hex
	} else {
		fresh.SHA256.Platforms = map[string]string{platform: hex}
	}
	i, found := l.index(name)
	if !found {
		l.insert(fresh)
		return nil
	}
	e := &l.Artifacts[i]
	at := name + "@" + version
	if e.ResolvedVersion != version {
		if update {
			*e = fresh
			return nil
		}
		return errs.New(errs.LockConflict, "murmur.lock pins %s at version %s, and version %s was asked for; nothing was changed. To move the pin, run `mur pull --update %s`; to keep it, ask for %s@%s",
			name, e.ResolvedVersion, version, at, name, e.ResolvedVersion)
	}
	switch {
	case platform == ref.PlatformAny && e.SHA256.Any != "":
		if e.SHA256.Any == hex {
			return nil
		}
		if update {
			*e = fresh
			return nil
		}
		return hashConflict(at, platform, e.SHA256.Any, hex)
	case platform == ref.PlatformAny && len(e.SHA256.Platforms) == 0:
		*e = fresh // an entry built without any hash: nothing to conflict with
		return nil
	case platform == ref.PlatformAny:
		if update {
			*e = fresh
			return nil
		}
		return errs.New(errs.LockConflict, "murmur.lock pins %s per platform (%s), and a platform-independent payload (any, sha256:%s) was offered; nothing was changed. If the publisher really moved to one payload for every platform, run `mur pull --update %s`",
			at, strings.Join(sortedKeys(e.SHA256.Platforms), ", "), hex, at)
	case e.SHA256.Any != "":
		if update {
			*e = fresh
			return nil
		}
		return errs.New(errs.LockConflict, "murmur.lock pins %s as platform-independent (any, sha256:%s), and a payload for %s (sha256:%s) was offered; nothing was changed. If the publisher really moved to per-platform payloads, run `mur pull --update %s`",
			at, e.SHA256.Any, platform, hex, at)
	}
	if old, ok := e.SHA256.Platforms[platform]; ok && old != hex && !update {
		return hashConflict(at, platform, old, hex)
	}
	if e.SHA256.Platforms == nil {
		e.SHA256.Platforms = map[string]string{}
	}
	e.SHA256.Platforms[platform] = hex
	return nil
}

func hashConflict(at, platform, pinned, offered string) error {
	return errs.New(errs.LockConflict, "murmur.lock pins %s for platform %s to sha256:%s, and the payload offered has sha256:%s; nothing was changed. The publisher may have replaced the release, or something in between altered it. If you trust the new payload, run `mur pull --update %s`; otherwise keep the pin and tell the publisher",
		at, platform, pinned, offered, at)
}

func (l *Lock) insert(e Entry) {
	i := sort.Search(len(l.Artifacts), func(i int) bool { return l.Artifacts[i].Name >= e.Name })
	l.Artifacts = append(l.Artifacts, Entry{})
	copy(l.Artifacts[i+1:], l.Artifacts[i:])
	l.Artifacts[i] = e
}

// Pin returns scope's owner pin.
func (l *Lock) Pin(scope string) (ScopePin, bool) {
	p, ok := l.Scopes[scope]
	return p, ok
}

// SetPin records scope's owner pin, replacing any earlier one. It refuses scope local always, and
// scope murmur with any source but github:murmur-nexus/default-artifacts.
func (l *Lock) SetPin(scope string, pin ScopePin) error {
	if msg := describePin(scope, pin); msg != "" {
		return errs.New(errs.InvalidLock, "can't pin scope %q: %s", scope, msg)
	}
	if l.Scopes == nil {
		l.Scopes = map[string]ScopePin{}
	}
	l.Scopes[scope] = pin
	return nil
}

// ForgetScope removes scope's owner pin and reports whether there was one.
func (l *Lock) ForgetScope(scope string) bool {
	if _, ok := l.Scopes[scope]; !ok {
		return false
	}
	delete(l.Scopes, scope)
	return true
}

// Digests lists every pinned hash, of every platform, and every recorded provenance bundle, once
// each, sorted: the blobs a lock keeps (GC roots, cache export).
func (l *Lock) Digests() []digest.Digest {
	seen := map[string]bool{}
	var out []digest.Digest
	add := func(hex string) {
		if hex != "" && !seen[hex] {
			seen[hex] = true
			out = append(out, digest.NewDigestFromEncoded(digest.SHA256, hex))
		}
	}
	for _, e := range l.Artifacts {
		add(e.SHA256.Any)
		for _, h := range e.SHA256.Platforms {
			add(h)
		}
		if e.Provenance != nil {
			add(strings.TrimPrefix(e.Provenance.Bundle, "sha256:"))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func validOrigin(o Origin) bool {
	s := string(o)
	if len(s) < 1 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// updateReadOnly is Update on a read-only file system: fn runs on the lock as it is, and
// refused is returned only if fn changed it.
func updateReadOnly(path string, fn func(*Lock) error, refused error) error {
	_, changed, err := apply(path, fn)
	if err != nil || !changed {
		return err
	}
	return refused
}

// apply reads the lock at path (an empty one when there is none), runs fn on it and returns
// what it marshals to, and whether that differs from the file: unchanged content, or a missing
// lock that stays empty, needs no write.
func apply(path string, fn func(*Lock) error) (data []byte, changed bool, err error) {
	old, err := safefile.ReadProject(path, MaxFileBytes, errs.InvalidLock)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	l := &Lock{Scopes: map[string]ScopePin{}}
	if exists {
		if l, err = Parse(old, path); err != nil {
			return nil, false, err
		}
	}
	if err := fn(l); err != nil {
		return nil, false, err
	}
	data = l.Marshal()
	if exists {
		return data, !bytes.Equal(data, old), nil
	}
	return data, len(l.Scopes) > 0 || len(l.Artifacts) > 0, nil
}
