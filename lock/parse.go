package lock

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

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
	// Every message names a line, the whole-file ones the first.
	where := fmt.Sprintf("%s: line %d", p.path, max(line, 1))
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
	root, err := yamlnode.Decode(data)
	var de *yamlnode.DecodeError
	switch {
	case errors.As(err, &de) && de.Problem == yamlnode.SecondDocument:
		return nil, p.fail(de.Line, "holds more than one YAML document (or is damaged after the first one); a lock is a single document. Restore it from version control, or move it aside and run `mur pull` to write a new one")
	case errors.As(err, &de) && de.Problem == yamlnode.NotUTF8:
		return nil, p.fail(de.Line, "is not UTF-8 from this line on; it may be damaged. Restore it from version control, or move it aside and run `mur pull` to write a new one")
	case err != nil:
		return nil, errs.Wrap(err, errs.InvalidLock, "%s is not valid YAML (%v); it may be truncated or damaged by a merge. Restore it from version control, or move it aside and run `mur pull` to write a new one", p.path, errors.Unwrap(err))
	case root == nil:
		return nil, p.version(nil) // only comments: no lock_version either
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
	if msg := describePin(scope, pin); msg != "" {
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
	f, err := p.fields(n, what, "name", "resolved_version", "sha256", "origin", "provenance")
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
		var origin string
		if origin, err = p.scalar(f, "origin", what, n.Line); err != nil {
			return Entry{}, err
		}
		e.Origin = Origin(origin)
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
	if pn := f["provenance"]; pn != nil {
		if pn.Kind != yaml.MappingNode {
			return Entry{}, p.fail(pn.Line, "%s: provenance must be a mapping with kind, bundle and signer, found %s; %s", what, yamlnode.Describe(pn), fix)
		}
		pf, err := p.fields(pn, what+" provenance", "kind", "bundle", "signer")
		if err != nil {
			return Entry{}, err
		}
		var prov Provenance
		if prov.Kind, err = p.scalar(pf, "kind", what+" provenance", pn.Line); err != nil {
			return Entry{}, err
		}
		if prov.Bundle, err = p.scalar(pf, "bundle", what+" provenance", pn.Line); err != nil {
			return Entry{}, err
		}
		if prov.Signer, err = p.scalar(pf, "signer", what+" provenance", pn.Line); err != nil {
			return Entry{}, err
		}
		if msg := describeProvenance(prov); msg != "" {
			return Entry{}, p.fail(pn.Line, "%s: provenance: %s; %s", what, msg, fix)
		}
		e.Provenance = &prov
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
