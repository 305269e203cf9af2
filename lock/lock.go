// Package lock reads, changes and writes murmur.lock (SPEC section 6), version 3.
//
// The lock says what was pinned, never where it came from: a digest per artifact (one for any
// platform, or one per platform) and, per scope, the GitHub owner and repository ids seen at the
// first source pull. Where each blob came from is the pull records' business.
//
// Writing is deterministic, so that two machines pinning the same things write the same bytes:
// lock_version, scopes, artifacts in that order; scopes sorted by name, artifacts by name; inside
// an entry name, resolved_version, sha256, origin; LF line ends and a trailing newline. Values
// that a YAML reader could take for a number, a boolean or null are double-quoted.
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
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/internal/yamlnode"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/config"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Version is the lock_version this mur reads and writes.
const Version = 3

// FileName is the lock's name beside murmur.yaml.
const FileName = "murmur.lock"

// OriginOperator is the default origin: pinned by the person or CI that runs mur.
const OriginOperator = "operator"

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
	Source  string // github:OWNER/REPO
	OwnerID int64  // GitHub's numeric id of the repository's owner
	RepoID  int64  // GitHub's numeric id of the repository
}

// Entry pins one artifact.
type Entry struct {
	Name            string // scope/name
	ResolvedVersion string
	SHA256          Hashes
	Origin          string // OriginOperator unless something else pinned it
}

// Hashes holds exactly one of Any and Platforms. Hashes are lowercase hex, without "sha256:".
type Hashes struct {
	Any       string
	Platforms map[string]string // platform tag → hex; never has the key "any"
}

// GuardPath is the file Update locks for the lock at path: a hidden sibling, because the lock
// itself is replaced by rename and a lock on a replaced inode guards nothing.
func GuardPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".lck")
}

// Read parses the lock at path. A missing file is an empty lock.
func Read(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Lock{Scopes: map[string]ScopePin{}}, nil
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	return Parse(data, path)
}

// Update reads the lock at path, lets fn change it and writes it back, all under an exclusive
// file lock, so that concurrent processes lose no change. If fn fails nothing is written and its
// error is returned as is. If the content is unchanged the file is not rewritten, and a missing
// lock that stays empty is not created.
func Update(ctx context.Context, path string, fn func(*Lock) error) error {
	unlock, err := lockedfile.Lock(ctx, GuardPath(path))
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't lock %s for writing: %v", path, err)
	}
	defer unlock()
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	l := &Lock{Scopes: map[string]ScopePin{}}
	if exists {
		if l, err = Parse(old, path); err != nil {
			return err
		}
	}
	if err := fn(l); err != nil {
		return err
	}
	data := l.Marshal()
	if exists && bytes.Equal(data, old) {
		return nil
	}
	if !exists && len(l.Scopes) == 0 && len(l.Artifacts) == 0 {
		return nil
	}
	// fn may have edited the fields directly; a lock that mur itself could not read back would
	// stop every later command, so it is never written.
	if _, err := Parse(data, path); err != nil {
		return errs.Wrap(err, errs.Internal, "refusing to write %s, because the change would make it unreadable: %s; this is a bug in mur, please report it", path, errs.Message(err))
	}
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.WriteFile(path, data, perm); err != nil {
		return errs.Wrap(err, errs.IO, "can't write %s: %v; check that its folder is writable and the disk is not full", path, err)
	}
	return nil
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
func (l *Lock) Upsert(name, version, platform, hex, origin string, update bool) error {
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
	if msg := checkPin(scope, pin); msg != "" {
		return errs.New(errs.InvalidLock, "can't pin scope %q: %s", scope, msg)
	}
	if l.Scopes == nil {
		l.Scopes = map[string]ScopePin{}
	}
	l.Scopes[scope] = pin
	return nil
}

// checkPin says what is wrong with a scope pin, or "".
func checkPin(scope string, pin ScopePin) string {
	if err := ref.ValidateSegment(scope); err != nil {
		return "the scope " + errs.Message(err)
	}
	if _, _, err := config.ParseSource(pin.Source); err != nil {
		return errs.Message(err)
	}
	switch {
	case scope == ref.ScopeLocal:
		return "scope local is reserved for files on disk and is never served by a source, so it has no owner to pin"
	case scope == ref.ScopeMurmur && pin.Source != config.MurmurSource:
		return fmt.Sprintf("scope murmur is reserved and served only by %s, not %s", config.MurmurSource, pin.Source)
	case pin.OwnerID <= 0:
		return fmt.Sprintf("owner_id must be a positive GitHub id, found %d", pin.OwnerID)
	case pin.RepoID <= 0:
		return fmt.Sprintf("repo_id must be a positive GitHub id, found %d", pin.RepoID)
	}
	return ""
}

// CheckOwner compares the owner id GitHub reports now for the pinned repository with the pin,
// and returns an owner-changed error that names the scope, both ids and the way to accept an
// expected transfer. Only the owner id is compared, as SPEC section 6 asks.
func (p ScopePin) CheckOwner(scope string, ownerID int64) error {
	if ownerID == p.OwnerID {
		return nil
	}
	return errs.New(errs.OwnerChanged, "scope %s (%s) is pinned to GitHub owner id %d, and the repository's owner is now id %d; a new owner may mean a transfer or a take-over of the name, so nothing was fetched. If you expected the transfer, run `mur lock forget-scope %s` and pull again",
		scope, p.Source, p.OwnerID, ownerID, scope)
}

// ForgetScope removes scope's owner pin and reports whether there was one.
func (l *Lock) ForgetScope(scope string) bool {
	if _, ok := l.Scopes[scope]; !ok {
		return false
	}
	delete(l.Scopes, scope)
	return true
}

// Digests lists every pinned hash, of every platform, once each, sorted.
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
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Marshal writes the lock in its canonical form. It does not change l.
//
// It writes the text itself rather than through a YAML encoder: the shape is fixed, every value
// is a short token, and a hand-written emitter is an order of magnitude faster on large locks.
func (l *Lock) Marshal() []byte {
	var b bytes.Buffer
	b.Grow(64 + 120*len(l.Scopes) + 220*len(l.Artifacts))
	b.WriteString("lock_version: ")
	b.WriteString(strconv.Itoa(Version))
	b.WriteString("\nscopes:")
	if len(l.Scopes) == 0 {
		b.WriteString(" {}")
	}
	b.WriteByte('\n')
	for _, name := range sortedKeys(l.Scopes) {
		p := l.Scopes[name]
		b.WriteString("  ")
		scalar(&b, name)
		b.WriteString(":\n    source: ")
		scalar(&b, p.Source)
		b.WriteString("\n    owner_id: ")
		b.WriteString(strconv.FormatInt(p.OwnerID, 10))
		b.WriteString("\n    repo_id: ")
		b.WriteString(strconv.FormatInt(p.RepoID, 10))
		b.WriteByte('\n')
	}
	b.WriteString("artifacts:")
	if len(l.Artifacts) == 0 {
		b.WriteString(" []")
	}
	b.WriteByte('\n')
	order := make([]int, len(l.Artifacts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := &l.Artifacts[order[i]], &l.Artifacts[order[j]]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ResolvedVersion < b.ResolvedVersion
	})
	for _, i := range order {
		e := &l.Artifacts[i]
		b.WriteString("  - name: ")
		scalar(&b, e.Name)
		b.WriteString("\n    resolved_version: ")
		scalar(&b, e.ResolvedVersion)
		b.WriteString("\n    sha256:\n")
		if e.SHA256.Any != "" || len(e.SHA256.Platforms) == 0 {
			b.WriteString("      any: ")
			scalar(&b, e.SHA256.Any)
			b.WriteByte('\n')
		} else {
			b.WriteString("      platforms:\n")
			for _, p := range sortedKeys(e.SHA256.Platforms) {
				b.WriteString("        ")
				scalar(&b, p)
				b.WriteString(": ")
				scalar(&b, e.SHA256.Platforms[p])
				b.WriteByte('\n')
			}
		}
		origin := e.Origin
		if origin == "" {
			origin = OriginOperator
		}
		b.WriteString("    origin: ")
		scalar(&b, origin)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// scalar writes v plain when every YAML reader takes it for that very string, and double-quoted
// otherwise: when it could be read as a number, a boolean (YAML 1.1's yes/no/on/off included) or
// null, or holds anything outside the few characters that names, versions, hashes and sources use.
func scalar(b *bytes.Buffer, v string) {
	if plainSafe(v) {
		b.WriteString(v)
		return
	}
	// Go's escapes (\n, \t, \", \\, \xNN, \uNNNN, \UNNNNNNNN) are all valid in YAML's double-quoted
	// style, and ASCII-only output keeps the file free of look-alike characters.
	b.WriteString(strconv.QuoteToASCII(v))
}

func plainSafe(v string) bool {
	if v == "" {
		return false
	}
	c := v[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/') {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '+', c == '-', c == '/':
		case c == ':' && i < len(v)-1 && !(v[0] >= '0' && v[0] <= '9'):
			// "a:b" is plain; a trailing ':' would start a mapping, and YAML 1.1 reads "1:20"
			// as a base-60 number.
		default:
			return false
		}
	}
	switch strings.ToLower(v) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		return false
	}
	return !looksNumeric(v)
}

// looksNumeric reports whether a YAML 1.1 or 1.2 reader could take v for an int or a float,
// including 0x/0o/0b forms, YAML 1.1's '_' separators and leading-zero octals. It errs toward
// yes: quoting a string that needed none costs nothing.
func looksNumeric(v string) bool {
	// Most values (names, hashes, versions like 1.2.0) are ruled out by a scan, without the
	// allocation of a failed strconv parse.
	body := strings.TrimLeft(v, "+-")
	if body == "" {
		return false
	}
	if c := body[0]; c >= '1' && c <= '9' || c == '.' {
		dots := 0
		for i := 0; i < len(body); i++ {
			switch c := body[i]; {
			case c >= '0' && c <= '9', c == '_', c == 'e', c == 'E', c == '+', c == '-':
			case c == '.':
				dots++
			default:
				return false
			}
		}
		if dots > 1 {
			return false
		}
	}
	s := strings.ReplaceAll(v, "_", "")
	if _, err := strconv.ParseInt(s, 0, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return true
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return true
	}
	return false
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

func validOrigin(s string) bool {
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

// Parse reads a lock from data; path names the file in error messages.
func Parse(data []byte, path string) (*Lock, error) {
	if path == "" {
		path = FileName
	}
	p := &parser{path: path}
	l, err := p.parse(data)
	if err != nil {
		return nil, err
	}
	return l, nil
}

type parser struct {
	path     string
	warnings []string
}

// fix is the advice for a damaged entry.
const fix = "fix or remove it (then `mur pull` pins it again), or restore murmur.lock from version control"

func (p *parser) fail(line int, format string, args ...any) error {
	where := p.path
	if line > 0 {
		where = fmt.Sprintf("%s: line %d", p.path, line)
	}
	return errs.New(errs.InvalidLock, "%s: %s", where, fmt.Sprintf(format, args...))
}

func (p *parser) warn(line int, format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf("%s: line %d: %s", p.path, line, fmt.Sprintf(format, args...)))
}

// fields collects a mapping's keys, refusing duplicates, and warns about keys not in known.
func (p *parser) fields(n *yaml.Node, what string, known ...string) (map[string]*yaml.Node, error) {
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.fail(k.Line, "%s has a key that is %s, not a name; %s", what, yamlnode.Describe(k), fix)
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.fail(k.Line, "%s has the key %q twice; %s", what, k.Value, fix)
		}
		out[k.Value] = v
		isKnown := false
		for _, kn := range known {
			if k.Value == kn {
				isKnown = true
				break
			}
		}
		if !isKnown {
			p.warn(k.Line, "%s: unknown key %q ignored; it is dropped when mur next writes the lock", what, k.Value)
		}
	}
	return out, nil
}

func (p *parser) parse(data []byte) (*Lock, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, p.fail(0, "the file is empty, and a lock written by mur always starts with lock_version: %d; restore it from version control, or delete it and run `mur pull` to write a new one", Version)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, p.version(nil) // only comments: no lock_version either
	} else if err != nil {
		return nil, errs.Wrap(err, errs.InvalidLock, "%s is not valid YAML (%v); it may be truncated or damaged by a merge. Restore it from version control, or move it aside and run `mur pull` to write a new one", p.path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, p.fail(0, "holds more than one YAML document (or is damaged after the first one); a lock is a single document. Restore it from version control, or move it aside and run `mur pull` to write a new one")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, p.fail(root.Line, "expected a mapping that starts with lock_version: %d, found %s; restore it from version control, or move it aside and run `mur pull` to write a new one", Version, yamlnode.Describe(root))
	}
	top, err := p.fields(root, "the lock", "lock_version", "scopes", "artifacts")
	if err != nil {
		return nil, err
	}
	if err := p.version(top["lock_version"]); err != nil {
		return nil, err
	}
	l := &Lock{Scopes: map[string]ScopePin{}}
	if n := top["scopes"]; n != nil && !yamlnode.IsNull(n) {
		if n.Kind != yaml.MappingNode {
			return nil, p.fail(n.Line, "scopes must be a mapping of scope names to owner pins, found %s; %s", yamlnode.Describe(n), fix)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			scope := k.Value
			if _, dup := l.Scopes[scope]; dup {
				return nil, p.fail(k.Line, "scope %q is pinned twice; keep one (or run `mur lock forget-scope %s` and pull again)", scope, scope)
			}
			pin, err := p.scopePin(scope, k, v)
			if err != nil {
				return nil, err
			}
			l.Scopes[scope] = pin
		}
	}
	if n := top["artifacts"]; n != nil && !yamlnode.IsNull(n) {
		if n.Kind != yaml.SequenceNode {
			return nil, p.fail(n.Line, "artifacts must be a list of entries, found %s; %s", yamlnode.Describe(n), fix)
		}
		at := map[string]int{}
		l.Artifacts = make([]Entry, 0, len(n.Content))
		for i, item := range n.Content {
			e, err := p.entry(i, item)
			if err != nil {
				return nil, err
			}
			if j, dup := at[e.Name]; dup {
				return nil, p.fail(item.Line, "artifacts[%d] (%s) pins %s again, after artifacts[%d]; a lock pins one version per artifact, so remove one of the two entries", i, e.Name, e.Name, j)
			}
			at[e.Name] = i
			l.Artifacts = append(l.Artifacts, e)
		}
		sort.Slice(l.Artifacts, func(i, j int) bool { return l.Artifacts[i].Name < l.Artifacts[j].Name })
	}
	if len(l.Artifacts) == 0 {
		l.Artifacts = nil // one spelling of "none", so that parsed locks compare equal
	}
	l.Warnings = p.warnings
	return l, nil
}

func (p *parser) version(n *yaml.Node) error {
	moveAside := fmt.Sprintf("move it aside (mv %s %s.old) and run `mur pull` to write a version %d lock", p.path, p.path, Version)
	if n == nil {
		return p.fail(0, "has no lock_version, and this mur reads lock_version %d; %s", Version, moveAside)
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return p.fail(n.Line, "lock_version must be the number %d, found %s; %s", Version, yamlnode.Describe(n), moveAside)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	switch {
	case err != nil:
		return p.fail(n.Line, "lock_version must be the number %d, found %q; %s", Version, n.Value, moveAside)
	case v > Version:
		return p.fail(n.Line, "lock_version is %d, and this mur reads lock_version %d only; the lock was written by a newer mur, so upgrade mur (this one is too old to read it)", v, Version)
	case v != Version:
		return p.fail(n.Line, "lock_version is %d, and this mur reads lock_version %d only; %s", v, Version, moveAside)
	}
	return nil
}

func (p *parser) scopePin(scope string, k, v *yaml.Node) (ScopePin, error) {
	what := fmt.Sprintf("scope %q", scope)
	if k.Kind != yaml.ScalarNode {
		return ScopePin{}, p.fail(k.Line, "scopes has a key that is %s, not a scope name; %s", yamlnode.Describe(k), fix)
	}
	if v.Kind != yaml.MappingNode {
		return ScopePin{}, p.fail(v.Line, "%s must be a mapping with source, owner_id and repo_id, found %s; run `mur lock forget-scope %s` and pull again to re-pin it", what, yamlnode.Describe(v), scope)
	}
	f, err := p.fields(v, what, "source", "owner_id", "repo_id")
	if err != nil {
		return ScopePin{}, err
	}
	var pin ScopePin
	if pin.Source, err = p.scalar(f, "source", what, v.Line); err != nil {
		return ScopePin{}, err
	}
	if pin.OwnerID, err = p.id(f, "owner_id", what, v.Line); err != nil {
		return ScopePin{}, err
	}
	if pin.RepoID, err = p.id(f, "repo_id", what, v.Line); err != nil {
		return ScopePin{}, err
	}
	if msg := checkPin(scope, pin); msg != "" {
		return ScopePin{}, p.fail(k.Line, "%s: %s; fix it, or delete this scope's pin from the file and pull again to re-pin it", what, msg)
	}
	return pin, nil
}

func (p *parser) id(f map[string]*yaml.Node, key, what string, line int) (int64, error) {
	n := f[key]
	if n == nil {
		return 0, p.fail(line, "%s has no %s; remove the pin and pull again to re-pin it", what, key)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil || v <= 0 {
		return 0, p.fail(n.Line, "%s: %s must be a positive GitHub id, found %s; remove the pin and pull again to re-pin it", what, key, yamlnode.Describe(n))
	}
	return v, nil
}

// scalar returns the text of a required scalar field.
func (p *parser) scalar(f map[string]*yaml.Node, key, what string, line int) (string, error) {
	n := f[key]
	if n == nil {
		return "", p.fail(line, "%s has no %s; %s", what, key, fix)
	}
	if n.Kind != yaml.ScalarNode || yamlnode.IsNull(n) {
		return "", p.fail(n.Line, "%s: %s must be a string, found %s; %s", what, key, yamlnode.Describe(n), fix)
	}
	return n.Value, nil
}

func (p *parser) entry(i int, n *yaml.Node) (Entry, error) {
	what := fmt.Sprintf("artifacts[%d]", i)
	if n.Kind != yaml.MappingNode {
		return Entry{}, p.fail(n.Line, "%s must be a mapping with name, resolved_version, sha256 and origin, found %s; %s", what, yamlnode.Describe(n), fix)
	}
	// Name the entry as soon as its name is known, so that every later message says which one.
	if nn := fieldNode(n, "name"); nn != nil && nn.Kind == yaml.ScalarNode && nn.Value != "" {
		what = fmt.Sprintf("artifacts[%d] (%s)", i, nn.Value)
	}
	f, err := p.fields(n, what, "name", "resolved_version", "sha256", "origin")
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if e.Name, err = p.scalar(f, "name", what, n.Line); err != nil {
		return Entry{}, err
	}
	if _, err := ref.ParseName(e.Name); err != nil {
		return Entry{}, p.fail(f["name"].Line, "%s: %s; %s", what, errs.Message(err), fix)
	}
	if e.ResolvedVersion, err = p.scalar(f, "resolved_version", what, n.Line); err != nil {
		return Entry{}, err
	}
	if err := ref.ValidateVersion(e.ResolvedVersion); err != nil {
		return Entry{}, p.fail(f["resolved_version"].Line, "%s: resolved_version: %s; %s", what, errs.Message(err), fix)
	}
	e.Origin = OriginOperator
	if f["origin"] != nil {
		if e.Origin, err = p.scalar(f, "origin", what, n.Line); err != nil {
			return Entry{}, err
		}
		if !validOrigin(e.Origin) {
			return Entry{}, p.fail(f["origin"].Line, "%s: origin %q must be 1 to 64 of a-z, 0-9 and '-', starting with a letter (normally %q); %s", what, e.Origin, OriginOperator, fix)
		}
	}
	hn := f["sha256"]
	if hn == nil {
		return Entry{}, p.fail(n.Line, "%s has no sha256; %s", what, fix)
	}
	if e.SHA256, err = p.hashes(hn, what); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (p *parser) hashes(n *yaml.Node, what string) (Hashes, error) {
	if n.Kind != yaml.MappingNode {
		return Hashes{}, p.fail(n.Line, "%s: sha256 must be a mapping with any or platforms, found %s; %s", what, yamlnode.Describe(n), fix)
	}
	f, err := p.fields(n, what+" sha256", "any", "platforms")
	if err != nil {
		return Hashes{}, err
	}
	anyN, platN := f["any"], f["platforms"]
	switch {
	case anyN != nil && platN != nil:
		return Hashes{}, p.fail(n.Line, "%s: sha256 has both any and platforms, and exactly one is allowed (any for a platform-independent payload, platforms for per-platform ones); %s", what, fix)
	case anyN == nil && platN == nil:
		return Hashes{}, p.fail(n.Line, "%s: sha256 has neither any nor platforms, and exactly one is required; %s", what, fix)
	case anyN != nil:
		h, err := p.hex(anyN, what+": sha256.any")
		return Hashes{Any: h}, err
	}
	if platN.Kind != yaml.MappingNode || len(platN.Content) == 0 {
		return Hashes{}, p.fail(platN.Line, "%s: sha256.platforms must map platform tags (%s) to hashes, found %s; %s", what, strings.Join(ref.KnownPlatforms, ", "), yamlnode.Describe(platN), fix)
	}
	out := Hashes{Platforms: map[string]string{}}
	for i := 0; i+1 < len(platN.Content); i += 2 {
		k, v := platN.Content[i], platN.Content[i+1]
		plat := k.Value
		if _, dup := out.Platforms[plat]; dup {
			return Hashes{}, p.fail(k.Line, "%s: sha256.platforms has %q twice; %s", what, plat, fix)
		}
		if k.Kind != yaml.ScalarNode || plat == ref.PlatformAny || ref.ValidatePlatform(plat) != nil {
			return Hashes{}, p.fail(k.Line, "%s: sha256.platforms has the key %s, and platform keys are %s (a platform-independent hash goes under sha256.any instead); %s", what, yamlnode.Describe(k), strings.Join(ref.KnownPlatforms, ", "), fix)
		}
		h, err := p.hex(v, fmt.Sprintf("%s: sha256.platforms.%s", what, plat))
		if err != nil {
			return Hashes{}, err
		}
		out.Platforms[plat] = h
	}
	return out, nil
}

func (p *parser) hex(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || !isHex64(n.Value) {
		return "", p.fail(n.Line, "%s must be 64 lowercase hex digits (a SHA-256, without \"sha256:\"), found %s; %s", what, yamlnode.Describe(n), fix)
	}
	return n.Value, nil
}

func fieldNode(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
