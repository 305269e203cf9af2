// Package manifest reads a capsule's murmur.yaml (SPEC section 5): the artifacts it declares and
// the capabilities it grants them.
//
// The capsule-wide capabilities are the ceiling. An artifact's own entry can only narrow them;
// Effective computes the result, field by field:
//
//   - filesystem.scope: the artifact's scope when it sets one, which must lie within the
//     capsule's scope (checked by Parse); otherwise the capsule's. The default is ".", the
//     workdir itself.
//   - filesystem.read_only: the union of both lists; making more read-only only takes write
//     access away. An artifact's entry must lie within the capsule's scope or within one of the
//     capsule's read-only subtrees, so that it can't reach anything new.
//   - state: an artifact keeps the capsule's grant unless its entry says `state: null`, which
//     drops it. `state: {}` or the same store name keeps it; naming another store is an error,
//     and so is asking for state that the capsule does not grant.
//   - env.allow: the intersection, in the capsule's order. An artifact that does not mention
//     env.allow keeps the capsule's list; `allow: []` allows nothing.
//   - limits: the smaller of each value that is set. 0 means unset; the sandbox then applies
//     DefaultMemoryMiB, DefaultStateMiB and no time limit.
//   - install.from: the intersection, in the capsule's order. The capsule's default is
//     [stores, sources].
//
// An unknown key under capabilities, the capsule's or an artifact's, is an error with its line
// and the key it most likely meant: a mistyped grant (readonly for read_only, limit for limits)
// would otherwise leave the guest more than the author meant. Unknown keys elsewhere are kept out
// of the result and reported in Capsule.Warnings with file and line, so that one murmur.yaml can
// serve other Murmur tools too; those that look like a mistyped capabilities key go to
// GrantWarnings instead, which concern the sandbox and are never silenced.
package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
	"github.com/murmur-nexus/mur/internal/suggest"
	"github.com/murmur-nexus/mur/internal/yamlnode"
)

// FileName is the capsule manifest's name, beside murmur.lock.
const FileName = "murmur.yaml"

// Limits that apply when murmur.yaml sets none.
const (
	DefaultMemoryMiB = 512  // the memory cap of a guest when limits.memory_mib is unset
	MaxMemoryMiB     = 4096 // a wasm32 guest can't address more
	DefaultStateMiB  = 256  // the state store's quota when limits.state_mib is unset
)

// The words of install.from (and of pull's --from): the one vocabulary of where a pull may look.
const (
	FromStores  = "stores"
	FromSources = "sources"
)

// DefaultFrom is install.from when a capsule says nothing: stores first, then sources.
func DefaultFrom() []string { return []string{FromStores, FromSources} }

// CheckFrom refuses a word that is not one of install.from's, naming the ones that are.
func CheckFrom(word string) error {
	if word != FromStores && word != FromSources {
		return errs.New(errs.Usage, "%q is not one of %s, %s", word, FromStores, FromSources)
	}
	return nil
}

// maxFileBytes bounds what Load reads: a capsule manifest is a few lines.
const maxFileBytes = 4 << 20

// Capsule is a parsed murmur.yaml.
type Capsule struct {
	Path         string // the file it was read from, as given
	Name         string // the capsule's name; the default state store
	Version      string
	Artifacts    []Artifact
	Capabilities Capabilities // the ceiling for every artifact
	Warnings     []string     // unknown keys, as "file:line: ..."
	// GrantWarnings are unknown keys that look like a mistyped capabilities key: what the
	// guest may do depends on them, so callers show them even when asked to be quiet.
	GrantWarnings []string
	// StoreNames lists every state-store name the file gives, where it gives it, for the one
	// store-name rule (state.ValidateStoreName) to judge. The parser does not judge them.
	StoreNames []StoreName
}

// StoreName is a state-store name as murmur.yaml gives it.
type StoreName struct {
	Store string
	Key   string // the key it stands under, e.g. capabilities.state.store, or name for the default
	Line  int
}

// Artifact is one entry of `artifacts:`.
type Artifact struct {
	Name         ref.Name
	Version      string        // an exact version, or ref.Latest
	Capabilities *Capabilities // nil when the entry narrows nothing
	Line         int           // where the entry starts in murmur.yaml
}

// Capabilities are the grants of the capsule, or an artifact's narrowing of them.
type Capabilities struct {
	Filesystem Filesystem
	State      *State // nil: no state store is granted
	Env        Env
	Limits     Limits
	Install    Install

	dropState bool // an artifact's `state: null`
}

// Filesystem holds paths relative to the workdir; none is absolute or holds "..".
type Filesystem struct {
	Scope    string // mounted as the guest's root; "." by default (empty in an artifact: not narrowed)
	ReadOnly []string
}

// State grants a durable state store.
type State struct {
	Store string // "" means the capsule's name
}

// Env lists the environment variables a guest may see.
type Env struct {
	Allow []string // in an artifact entry, nil means not narrowed and empty means none
}

// Limits caps a guest. 0 means unset.
type Limits struct {
	MemoryMiB int
	StateMiB  int // what the guest may keep in its state store; 0 means DefaultStateMiB
	TimeoutS  int
}

// Install lists where pulls may take payloads from: "stores", "sources", or both.
type Install struct {
	From []string // in an artifact entry, nil means not narrowed
}

// Load reads and parses a murmur.yaml.
func Load(p string) (*Capsule, error) {
	data, err := Read(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.NotFound, "%s does not exist; run mur in a capsule folder, beside its murmur.yaml", p)
	}
	if err != nil {
		return nil, err
	}
	return Parse(data, p)
}

// Read reads a murmur.yaml's bytes as a project's file (safefile.ReadProject), within the bound
// of a manifest; a missing file is an error that wraps fs.ErrNotExist.
func Read(p string) ([]byte, error) {
	return safefile.ReadProject(p, maxFileBytes, errs.InvalidManifest)
}

// Parse parses murmur.yaml's bytes; p names the file in messages.
func Parse(data []byte, p string) (*Capsule, error) {
	root, err := yamlnode.Decode(data)
	var de *yamlnode.DecodeError
	switch {
	case errors.As(err, &de) && de.Problem == yamlnode.NotUTF8:
		return nil, errs.New(errs.InvalidManifest, "%s:%d: the file is not UTF-8 from this line on; save it as UTF-8", p, de.Line)
	case errors.As(err, &de) && de.Problem == yamlnode.SecondDocument:
		return nil, errs.New(errs.InvalidManifest, "%s:%d: a second YAML document starts here; a manifest is a single one", p, de.Line)
	case err != nil:
		return nil, errs.Wrap(err, errs.InvalidManifest, "%s is not valid YAML: %v; fix the line it names", p, errors.Unwrap(err))
	case root == nil:
		root = &yaml.Node{}
	}
	ps := &parser{path: p}
	c := &Capsule{Path: p}
	if root.Kind == 0 || yamlnode.IsNull(root) {
		return nil, errs.New(errs.InvalidManifest, "%s:1: the file is empty; it needs at least name, e.g. name: my-capsule", p)
	}
	top, err := ps.fields(root, "", "name", "version", "artifacts", "capabilities")
	if err != nil {
		return nil, err
	}
	nameNode := top["name"]
	if nameNode == nil {
		return nil, errs.New(errs.InvalidManifest, "%s:%d: no name; add the capsule's name, e.g. name: my-capsule", p, max(root.Line, 1))
	}
	if c.Name, err = ps.str(nameNode, "name"); err != nil {
		return nil, err
	}
	if c.Name == "" {
		return nil, ps.errf(nameNode, "name", "is empty; give the capsule a name, e.g. name: my-capsule")
	}
	if v := top["version"]; v != nil {
		if c.Version, err = ps.str(v, "version"); err != nil {
			return nil, err
		}
	}
	c.Capabilities.Filesystem.Scope = "."
	c.Capabilities.Install.From = DefaultFrom()
	if n := top["capabilities"]; n != nil {
		if err := ps.capabilities(n, "capabilities", &c.Capabilities, nil); err != nil {
			return nil, err
		}
	}
	if st := c.Capabilities.State; st != nil && st.Store == "" {
		ps.storeNames = append(ps.storeNames, StoreName{Store: c.Name, Key: "name", Line: nameNode.Line})
	}
	if n := top["artifacts"]; n != nil {
		if err := ps.artifacts(n, c); err != nil {
			return nil, err
		}
	}
	c.Warnings = ps.warnings
	c.GrantWarnings = ps.grantWarnings
	c.StoreNames = ps.storeNames
	return c, nil
}

type parser struct {
	path          string
	warnings      []string
	grantWarnings []string
	storeNames    []StoreName
}

func (ps *parser) errf(n *yaml.Node, key, format string, args ...any) error {
	return errs.New(errs.InvalidManifest, "%s:%d: %s %s", ps.path, n.Line, key, fmt.Sprintf(format, args...))
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// fields reads a mapping, keeps the known keys, and warns about the others. A null node is an
// empty mapping, so `capabilities:` with nothing under it is fine.
func (ps *parser) fields(n *yaml.Node, prefix string, known ...string) (map[string]*yaml.Node, error) {
	return ps.mapping(n, prefix, false, known)
}

// grants is fields for a mapping under capabilities, where an unknown key is an error.
func (ps *parser) grants(n *yaml.Node, prefix string, known ...string) (map[string]*yaml.Node, error) {
	return ps.mapping(n, prefix, true, known)
}

func (ps *parser) mapping(n *yaml.Node, prefix string, strict bool, known []string) (map[string]*yaml.Node, error) {
	n = deref(n)
	out := map[string]*yaml.Node{}
	if yamlnode.IsNull(n) {
		return out, nil
	}
	if n.Kind != yaml.MappingNode {
		where := prefix
		if where == "" {
			where = "the document"
		}
		return nil, errs.New(errs.InvalidManifest, "%s:%d: %s must be a mapping, found %s", ps.path, n.Line, where, yamlnode.Describe(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if line, dup := seen[key]; dup {
			return nil, ps.errf(k, join(prefix, key), "appears twice (first on line %d); keep one", line)
		}
		seen[key] = k.Line
		isKnown := false
		for _, kn := range known {
			if kn == key {
				isKnown = true
			}
		}
		if !isKnown || k.Kind != yaml.ScalarNode {
			if strict {
				return nil, ps.unknownGrant(k, prefix, known)
			}
			if near, ok := suggest.Nearest(key, []string{"capabilities"}); ok && k.Kind == yaml.ScalarNode && contains(known, near) {
				ps.grantWarnings = append(ps.grantWarnings, fmt.Sprintf("%s:%d: unknown key %q ignored; did you mean %s? Without it the guest gets %s", ps.path, k.Line, join(prefix, key), near, grantsWithout(prefix)))
				continue
			}
			hint := ""
			if near, ok := suggest.Nearest(key, known); ok && k.Kind == yaml.ScalarNode {
				hint = "; did you mean " + near + "?"
			}
			ps.warnings = append(ps.warnings, fmt.Sprintf("%s:%d: unknown key %q ignored%s", ps.path, k.Line, join(prefix, key), hint))
			continue
		}
		out[key] = v
	}
	return out, nil
}

// unknownGrant is the error for key k under the grants mapping prefix, which knows only known.
func (ps *parser) unknownGrant(k *yaml.Node, prefix string, known []string) error {
	hint := "its keys are " + strings.Join(known, ", ") + "."
	if near, ok := suggest.Nearest(k.Value, known); ok && k.Kind == yaml.ScalarNode {
		hint = "did you mean " + near + "?"
	}
	return errs.New(errs.InvalidManifest, "%s:%d: %s has no key %s; %s A grant mur can't read is refused rather than guessed at, since it decides what the guest may do", ps.path, k.Line, prefix, yamlnode.Describe(k), hint)
}

// grantsWithout says what a guest gets when the capabilities key at prefix is missing.
func grantsWithout(prefix string) string {
	if prefix == "" {
		return "the default grants (the workdir, no state store, default limits)"
	}
	return "the capsule's grants, not narrowed"
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// str reads a scalar as the text written; null is "".
func (ps *parser) str(n *yaml.Node, key string) (string, error) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		return "", ps.errf(n, key, "must be a string, found %s", yamlnode.Describe(n))
	}
	if yamlnode.IsNull(n) {
		return "", nil
	}
	return n.Value, nil
}

// list reads a list of strings; null is nil, [] is empty and not nil.
func (ps *parser) list(n *yaml.Node, key string) ([]string, error) {
	n = deref(n)
	if yamlnode.IsNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, ps.errf(n, key, "must be a list, found %s", yamlnode.Describe(n))
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		s, err := ps.str(item, key)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (ps *parser) positive(n *yaml.Node, key string, max int, unit string) (int, error) {
	n = deref(n)
	if yamlnode.IsNull(n) {
		return 0, nil
	}
	v, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || err != nil || v < 0 {
		return 0, ps.errf(n, key, "must be a whole number of %s, found %s", unit, yamlnode.Describe(n))
	}
	if max > 0 && v > max {
		return 0, ps.errf(n, key, "is %d; it can be at most %d", v, max)
	}
	return v, nil
}

// relPath checks a path relative to the workdir and returns it cleaned.
func (ps *parser) relPath(n *yaml.Node, key string) (string, error) {
	s, err := ps.str(n, key)
	if err != nil {
		return "", err
	}
	switch {
	case s == "":
		return "", ps.errf(n, key, "is empty; use \".\" for the workdir itself")
	case strings.ContainsRune(s, 0):
		return "", ps.errf(n, key, "%q holds a NUL byte", s)
	case strings.Contains(s, `\`):
		return "", ps.errf(n, key, "%q holds a backslash; write paths with '/'", s)
	case strings.HasPrefix(s, "/") || len(s) >= 2 && s[1] == ':':
		return "", ps.errf(n, key, "%q is absolute; use a path relative to the workdir, such as \"data\"", s)
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == ".." {
			return "", ps.errf(n, key, "%q climbs out of the workdir with \"..\"; use a path inside it", s)
		}
	}
	return path.Clean(s), nil
}

// capabilities parses a capabilities mapping into out. ceiling is nil for the capsule's own, and
// the capsule's grants when parsing an artifact's narrowing.
func (ps *parser) capabilities(n *yaml.Node, prefix string, out *Capabilities, ceiling *capsuleCeiling) error {
	f, err := ps.grants(n, prefix, "filesystem", "state", "env", "limits", "install")
	if err != nil {
		return err
	}
	if fsn := f["filesystem"]; fsn != nil {
		key := join(prefix, "filesystem")
		ff, err := ps.grants(fsn, key, "scope", "read_only")
		if err != nil {
			return err
		}
		if sn := ff["scope"]; sn != nil && !yamlnode.IsNull(deref(sn)) {
			k := join(key, "scope")
			if out.Filesystem.Scope, err = ps.relPath(sn, k); err != nil {
				return err
			}
			if ceiling != nil && !atomicfile.Within(out.Filesystem.Scope, ceiling.caps.Filesystem.Scope) {
				return ps.errf(sn, k, "%q lies outside the capsule's scope %q; an artifact can only narrow the capsule's grants", out.Filesystem.Scope, ceiling.caps.Filesystem.Scope)
			}
		}
		if rn := ff["read_only"]; rn != nil {
			k := join(key, "read_only")
			items := deref(rn)
			paths, err := ps.list(rn, k)
			if err != nil {
				return err
			}
			for i := range paths {
				if paths[i], err = ps.relPath(items.Content[i], k); err != nil {
					return err
				}
				if ceiling != nil && !ceiling.reaches(paths[i]) {
					return ps.errf(items.Content[i], k, "%q lies outside everything the capsule grants (scope %q, read_only %q); an artifact can only narrow the capsule's grants", paths[i], ceiling.caps.Filesystem.Scope, ceiling.caps.Filesystem.ReadOnly)
				}
			}
			out.Filesystem.ReadOnly = paths
		}
	}
	if sn, ok := f["state"]; ok {
		key := join(prefix, "state")
		if yamlnode.IsNull(deref(sn)) {
			out.State, out.dropState = nil, ceiling != nil
		} else {
			sf, err := ps.grants(sn, key, "store")
			if err != nil {
				return err
			}
			out.State = &State{}
			if st := sf["store"]; st != nil {
				k := join(key, "store")
				if out.State.Store, err = ps.str(st, k); err != nil {
					return err
				}
				if out.State.Store != "" {
					ps.storeNames = append(ps.storeNames, StoreName{Store: out.State.Store, Key: k, Line: st.Line})
				}
			}
			if ceiling != nil {
				if ceiling.caps.State == nil {
					return ps.errf(sn, key, "asks for a state store, but the capsule's capabilities grant none; grant it under capabilities.state first")
				}
				if s := out.State.Store; s != "" && s != ceiling.store {
					return ps.errf(sn, key, "names store %q, but the capsule grants %q; an artifact can only keep or drop the capsule's store", s, ceiling.store)
				}
			}
		}
	}
	if en := f["env"]; en != nil {
		key := join(prefix, "env")
		ef, err := ps.grants(en, key, "allow")
		if err != nil {
			return err
		}
		if an := ef["allow"]; an != nil {
			k := join(key, "allow")
			if out.Env.Allow, err = ps.list(an, k); err != nil {
				return err
			}
			for i, name := range out.Env.Allow {
				if name == "" || strings.ContainsAny(name, "=\x00") {
					return ps.errf(deref(an).Content[i], k, "%q is not an environment variable name", name)
				}
			}
		}
	}
	if ln := f["limits"]; ln != nil {
		key := join(prefix, "limits")
		lf, err := ps.grants(ln, key, "memory_mib", "timeout_s", "state_mib")
		if err != nil {
			return err
		}
		if m := lf["memory_mib"]; m != nil {
			if out.Limits.MemoryMiB, err = ps.positive(m, join(key, "memory_mib"), MaxMemoryMiB, "MiB"); err != nil {
				return err
			}
		}
		if m := lf["state_mib"]; m != nil {
			if out.Limits.StateMiB, err = ps.positive(m, join(key, "state_mib"), 0, "MiB"); err != nil {
				return err
			}
		}
		if t := lf["timeout_s"]; t != nil {
			if out.Limits.TimeoutS, err = ps.positive(t, join(key, "timeout_s"), 0, "seconds"); err != nil {
				return err
			}
		}
	}
	if in := f["install"]; in != nil {
		key := join(prefix, "install")
		inf, err := ps.grants(in, key, "from")
		if err != nil {
			return err
		}
		if fn := inf["from"]; fn != nil {
			k := join(key, "from")
			from, err := ps.list(fn, k)
			if err != nil {
				return err
			}
			if from == nil {
				from = []string{}
			}
			var clean []string
			for i, s := range from {
				if err := CheckFrom(s); err != nil {
					return ps.errf(deref(fn).Content[i], k, "entry %s", errs.Message(err))
				}
				if !contains(clean, s) {
					clean = append(clean, s)
				}
			}
			if clean == nil {
				clean = []string{}
			}
			out.Install.From = clean
		}
	}
	return nil
}

// capsuleCeiling is what an artifact's entry is checked against.
type capsuleCeiling struct {
	caps  *Capabilities
	store string
}

func (c *capsuleCeiling) reaches(p string) bool {
	if atomicfile.Within(p, c.caps.Filesystem.Scope) {
		return true
	}
	for _, ro := range c.caps.Filesystem.ReadOnly {
		if atomicfile.Within(p, ro) {
			return true
		}
	}
	return false
}

func (ps *parser) artifacts(n *yaml.Node, c *Capsule) error {
	n = deref(n)
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return ps.errf(n, "artifacts", "must be a list of {name, version}, found %s", yamlnode.Describe(n))
	}
	ceiling := &capsuleCeiling{caps: &c.Capabilities, store: c.StoreName()}
	lines := map[ref.Name]int{}
	for i, item := range n.Content {
		prefix := fmt.Sprintf("artifacts[%d]", i)
		f, err := ps.fields(item, prefix, "name", "version", "capabilities")
		if err != nil {
			return err
		}
		a := Artifact{Line: deref(item).Line, Version: ref.Latest}
		nn := f["name"]
		if nn == nil {
			return ps.errf(deref(item), prefix, "has no name; add one such as name: acme/grep")
		}
		s, err := ps.str(nn, prefix+".name")
		if err != nil {
			return err
		}
		if a.Name, err = ref.ParseName(s); err != nil {
			return ps.errf(nn, prefix+".name", "%s", errs.Message(err))
		}
		if line, dup := lines[a.Name]; dup {
			return ps.errf(nn, prefix+".name", "declares %s again (first on line %d); keep one entry", a.Name, line)
		}
		lines[a.Name] = nn.Line
		if vn := f["version"]; vn != nil && !yamlnode.IsNull(deref(vn)) {
			v, err := ps.str(vn, prefix+".version")
			if err != nil {
				return err
			}
			if strings.EqualFold(v, ref.Latest) {
				v = ref.Latest
			} else if err := ref.ValidateVersion(v); err != nil {
				return ps.errf(vn, prefix+".version", "%s", errs.Message(err))
			}
			a.Version = v
		}
		if cn := f["capabilities"]; cn != nil && !yamlnode.IsNull(deref(cn)) {
			a.Capabilities = &Capabilities{}
			if err := ps.capabilities(cn, prefix+".capabilities", a.Capabilities, ceiling); err != nil {
				return err
			}
		}
		c.Artifacts = append(c.Artifacts, a)
	}
	return nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
