// Package config reads the two config.yaml files mur obeys, the home's ($MURMUR_HOME/config.yaml)
// and a project's (.murmur/config.yaml), into plain values: stores, sources, the mirror, the
// cache's bounds and each scope's provenance policy (provenance.go).
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
	"github.com/murmur-nexus/mur/internal/suggest"
	"github.com/murmur-nexus/mur/internal/yamlnode"
	"github.com/murmur-nexus/mur/lock"
)

// The two config.yaml files of SPEC section 13: the user's
// `$MURMUR_HOME/config.yaml` and a project's `.murmur/config.yaml`.
//
//	stores: [ "oci://registry.internal:5000/murmur", "oci-layout:/srv/murmur-store" ]
//	sources: { acme: "github:acme/murmur-tools" }
//	cache: { max_size: 20GiB }
//	mirror: oci://registry.internal:5000/murmur
//	mirror_required: false
//
// Decisions the SPEC leaves open:
//   - Both files are optional. A project's stores come first, then the home's, with exact
//     duplicates dropped; a project's source for a scope overrides the home's.
//   - A relative `oci-layout:` path is resolved against the folder it is written for: the project
//     folder (the one holding `.murmur/`) for the project config, the home folder for the home
//     config. There is no `~` expansion.
//   - The reserved scopes can't be redirected: `local` is never served by a source, and `murmur`
//     is always `github:murmur-nexus/default-artifacts` (writing exactly that is tolerated).
//   - Config files are written by people, and newer mur may add keys, so unknown keys are ignored
//     and reported in Config.Warnings instead of failing every command.
//   - pull.max_decompressed bounds what the payloads one pull stages decompress to together
//     (fetch/stage's budget), a size as cache.max_size is; of the two files' values the smaller
//     holds, since a cloned project must not widen a bound against its own artifacts.
//   - cache.max_size caps the CAS: after each pull, unpinned blobs go, least recently used first,
//     until the blobs hold at most that many bytes (see GC). It is a number of bytes with an
//     optional unit, K, M, G or T, each 1024 times the one before, spelled K, KB or KiB alike (as
//     docker's --keep-storage reads them). A project's value wins over the home's.
//   - A store entry may be a mapping, {url: ADDRESS, plain_http: BOOL, fallback: not-found |
//     any-error}; fallback says when a failure of that store falls through to the next place
//     (chain.go). When the project and the home list the same address, the project's entry
//     decides.
//   - mirror: is a registry that every artifact brought in from elsewhere is written through to
//     (mirror.go); an address or {url, plain_http}. mirror_required: true makes a failed
//     write-through fail the command. A project's value of either wins over the home's.

// ProjectFile is where a project's config lives, relative to the project folder.
const ProjectFile = ".murmur/config.yaml"

// Config is the merged configuration of the home and the project.
type Config struct {
	// Stores are store addresses in the order they are tried: the project's, then the home's.
	Stores []string
	// Sources maps a scope to the `github:OWNER/REPO` that serves it.
	Sources map[string]string
	// MaxCacheSize is cache.max_size in bytes; 0 when neither file sets it.
	MaxCacheSize int64
	// MaxPullDecompressed is pull.max_decompressed in bytes, the smaller of the two files'; 0
	// when neither sets it.
	MaxPullDecompressed int64
	// PlainHTTP holds the oci:// stores (and the mirror) written as {url: …, plain_http: true}:
	// registries the user chose to reach over plain HTTP (never chosen for them off loopback).
	PlainHTTP map[string]bool
	// Fallbacks holds the stores written as {url: …, fallback: any-error} or not-found.
	Fallbacks map[string]store.Fallback
	// Mirror is the registry pulls write through to, "" for none; MirrorRequired makes a failed
	// write-through fail the command.
	Mirror         string
	MirrorRequired bool
	// Provenance is the home's provenance policy (provenance.go): the home decides trust.
	Provenance ProvenanceConfig
	// ProjectProvenance is what the project's config.yaml says of provenance; ProvenanceFor
	// takes from it only what tightens the home's policy.
	ProjectProvenance ProvenanceConfig
	// MirrorFromProject is set when the mirror is named by the project's .murmur/config.yaml and
	// not by the home's config.yaml: a cloned project's choice (see Puller.MirrorFromProject).
	MirrorFromProject bool
	// ProjectStores are the stores the project's config.yaml lists and the home's does not: what
	// they serve, and public sources, is all that a project's own mirror receives.
	ProjectStores map[string]bool
	// Warnings name keys that were ignored, with their file, for the command to print.
	Warnings []string
}

// Load reads homeConfigPath and, when projectDir is not empty, projectDir/.murmur/config.yaml,
// and merges them. A missing file counts as an empty one.
func Load(homeConfigPath, projectDir string) (*Config, error) {
	c := &Config{Sources: map[string]string{}, PlainHTTP: map[string]bool{}, Fallbacks: map[string]store.Fallback{}}
	var project, user *configFile
	var projectPath string
	var err error
	if projectDir != "" {
		abs, aerr := filepath.Abs(projectDir)
		if aerr != nil {
			return nil, errs.Wrap(aerr, errs.IO, "the project folder %q can't be made absolute: %v", projectDir, aerr)
		}
		projectPath = filepath.Join(abs, ProjectFile)
		if project, err = readConfigFile(projectPath, abs, false); err != nil {
			return nil, err
		}
	}
	if homeConfigPath != "" {
		abs, aerr := filepath.Abs(homeConfigPath)
		if aerr != nil {
			return nil, errs.Wrap(aerr, errs.IO, "the config file %q can't be made absolute: %v", homeConfigPath, aerr)
		}
		if user, err = readConfigFile(abs, filepath.Dir(abs), true); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, f := range []*configFile{project, user} {
		if f == nil {
			continue
		}
		for _, s := range f.stores {
			if !seen[s] {
				seen[s] = true
				c.Stores = append(c.Stores, s)
				if f.plainHTTP[s] {
					c.PlainHTTP[s] = true
				}
				if fb, ok := f.fallbacks[s]; ok {
					c.Fallbacks[s] = fb
				}
			}
		}
		c.Warnings = append(c.Warnings, f.warnings...)
	}
	// The home first, so that the project's entries overwrite it.
	for _, f := range []*configFile{user, project} {
		if f == nil {
			continue
		}
		for k, v := range f.sources {
			c.Sources[k] = v
		}
		if f.maxCacheSize > 0 {
			c.MaxCacheSize = f.maxCacheSize
		}
		if n := f.maxPullDecompressed; n > 0 && (c.MaxPullDecompressed == 0 || n < c.MaxPullDecompressed) {
			// A bound against what a project's own artifacts expand to: the project may lower
			// the home's, never raise it.
			c.MaxPullDecompressed = n
		}
		if f.mirror != "" {
			c.Mirror = f.mirror
			if f.plainHTTP[f.mirror] {
				c.PlainHTTP[f.mirror] = true
			}
		}
		if f.mirrorRequired != nil {
			c.MirrorRequired = *f.mirrorRequired
		}
	}
	// The home decides trust; a cloned project may only tighten it (provenance.go).
	if user != nil {
		mergeProvenance(&c.Provenance, user.provenance)
	}
	if project != nil {
		c.ProjectProvenance = project.provenance
		c.Warnings = append(c.Warnings, loosening(c.Provenance, project.provenance, projectPath)...)
	}
	c.MirrorFromProject = project != nil && project.mirror != "" && (user == nil || user.mirror != project.mirror)
	c.ProjectStores = map[string]bool{}
	if project != nil {
		for _, s := range project.stores {
			if user == nil || !slices.Contains(user.stores, s) {
				c.ProjectStores[s] = true
			}
		}
	}
	return c, nil
}

// SourceFor is the source that serves scope: `local` has none, `murmur` is always lock.MurmurSource,
// a configured scope has its entry, and any other scope S is `github:S/murmur-artifacts`.
func (c *Config) SourceFor(scope string) string {
	if c != nil && scope != ref.ScopeLocal && scope != ref.ScopeMurmur {
		if s, ok := c.Sources[scope]; ok {
			return s
		}
	}
	return lock.DefaultSource(scope)
}

// Mapped reports whether scope's source is known rather than guessed: local and murmur always
// are, any other scope when a config file maps it under sources:.
func (c *Config) Mapped(scope string) bool {
	if scope == ref.ScopeLocal || scope == ref.ScopeMurmur {
		return true
	}
	if c == nil {
		return false
	}
	_, ok := c.Sources[scope]
	return ok
}

// configFile is one parsed config file, already validated and with its paths resolved.
type configFile struct {
	stores       []string
	plainHTTP    map[string]bool
	fallbacks    map[string]store.Fallback
	sources      map[string]string
	maxCacheSize int64
	// maxPullDecompressed is pull.max_decompressed; 0 when the file does not set it.
	maxPullDecompressed int64
	mirror              string
	mirrorRequired      *bool
	provenance          ProvenanceConfig
	warnings            []string
}

// sizeKey reads parent: { key: SIZE } (cache.max_size, pull.max_decompressed) into dst,
// warning of any other key under parent.
func (f *configFile) sizeKey(path, parent, key, example string, v *yaml.Node, dst *int64) error {
	if yamlnode.IsNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping such as { %s: %s }, found %s", v.Line, parent, key, example, yamlnode.Describe(v))
	}
	for j := 0; j+1 < len(v.Content); j += 2 {
		ck, cv := v.Content[j], v.Content[j+1]
		if ck.Value != key {
			f.warnings = append(f.warnings, fmt.Sprintf("%s: line %d: unknown key %s.%s ignored", path, ck.Line, parent, ck.Value))
			continue
		}
		if cv.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s.%s must be a size such as %s, found %s", cv.Line, parent, key, example, yamlnode.Describe(cv))
		}
		n, err := cas.ParseSize(cv.Value)
		if err != nil {
			return fmt.Errorf("line %d: %s.%s: %s", cv.Line, parent, key, errs.Message(err))
		}
		*dst = n
	}
	return nil
}

// maxConfigBytes caps what is read of a config file, which holds a few lines.
const maxConfigBytes = 1 << 20

// topKeys are the keys config.yaml knows at its top level, for "did you mean".
var topKeys = []string{"stores", "mirror", "mirror_required", "sources", "cache", "pull", "provenance", "trusted_root", "trusted_keys", "tuf_repositories", "scopes"}

// readConfigFile reads one config file; home says it is the home's, the one that decides trust.
func readConfigFile(path, baseDir string, home bool) (*configFile, error) {
	data, err := safefile.ReadProject(path, maxConfigBytes, errs.InvalidConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseConfig(data, path, baseDir, home)
}

func parseConfig(data []byte, path, baseDir string, home bool) (*configFile, error) {
	bad := func(format string, args ...any) error {
		return errs.New(errs.InvalidConfig, "%s: %s", path, fmt.Sprintf(format, args...))
	}
	f := &configFile{sources: map[string]string{}, plainHTTP: map[string]bool{}, fallbacks: map[string]store.Fallback{}}
	root, err := yamlnode.Decode(data)
	var de *yamlnode.DecodeError
	switch {
	case errors.As(err, &de) && de.Problem != yamlnode.NotYAML:
		return nil, bad("%s", de.Error())
	case err != nil:
		return nil, errs.Wrap(err, errs.InvalidConfig, "%s is not valid YAML: %v; fix the file or move it aside", path, errors.Unwrap(err))
	case root == nil:
		return f, nil // an empty file is an empty config
	}
	if yamlnode.IsNull(root) {
		return f, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, bad("line %d: expected a mapping with the keys stores and sources, found %s", root.Line, yamlnode.Describe(root))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			return nil, bad("line %d: key %q appears twice; keep one", k.Line, k.Value)
		}
		seen[k.Value] = true
		switch k.Value {
		case "stores":
			if yamlnode.IsNull(v) {
				continue
			}
			items := v.Content
			switch v.Kind {
			case yaml.SequenceNode:
			case yaml.ScalarNode, yaml.MappingNode:
				// One store needs no list: stores: oci://registry:5000/murmur.
				items = []*yaml.Node{v}
			default:
				return nil, bad("line %d: stores must be a store address or a list of them, found %s", v.Line, yamlnode.Describe(v))
			}
			for j, item := range items {
				it, warns, err := store.ParseEntry(item, fmt.Sprintf("stores[%d]", j), path)
				if err != nil {
					return nil, bad("%s", err)
				}
				f.warnings = append(f.warnings, warns...)
				addr := store.ResolveStore(it.Addr, baseDir)
				f.stores = append(f.stores, addr)
				if it.Plain {
					f.plainHTTP[addr] = true
				}
				if it.Fallback != "" {
					f.fallbacks[addr] = it.Fallback
				}
			}
		case "mirror":
			if yamlnode.IsNull(v) {
				continue
			}
			it, warns, err := store.ParseEntry(v, "mirror", path)
			if err != nil {
				return nil, bad("%s", err)
			}
			f.warnings = append(f.warnings, warns...)
			if !strings.HasPrefix(it.Addr, store.SchemeOCI) {
				return nil, bad("line %d: mirror must be a registry, oci://HOST[:PORT]/PREFIX, found %s; a folder is filled with 'mur warm --layout DIR'", v.Line, it.Addr)
			}
			if it.Fallback != "" {
				return nil, bad("line %d: mirror takes no fallback: it is written to, not read from; list it under stores: to read from it", v.Line)
			}
			f.mirror = it.Addr
			if it.Plain {
				f.plainHTTP[it.Addr] = true
			}
		case "mirror_required":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				return nil, bad("line %d: mirror_required must be true or false, found %s", v.Line, yamlnode.Describe(v))
			}
			b := strings.EqualFold(v.Value, "true")
			f.mirrorRequired = &b
		case "sources":
			if yamlnode.IsNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return nil, bad("line %d: sources must map scopes to github:OWNER/REPO, found %s", v.Line, yamlnode.Describe(v))
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				sk, sv := v.Content[j], v.Content[j+1]
				scope := sk.Value
				if _, dup := f.sources[scope]; dup {
					return nil, bad("line %d: sources.%s appears twice; keep one", sk.Line, scope)
				}
				if err := ref.ValidateSegment(scope); err != nil {
					return nil, bad("line %d: sources key %q is not a scope: %s", sk.Line, scope, errs.Message(err))
				}
				if sv.Kind != yaml.ScalarNode {
					return nil, bad("line %d: sources.%s must be a string github:OWNER/REPO, found %s", sv.Line, scope, yamlnode.Describe(sv))
				}
				if _, _, err := lock.ParseSource(sv.Value); err != nil {
					return nil, bad("line %d: sources.%s: %s", sv.Line, scope, errs.Message(err))
				}
				if err := lock.CheckScopeSource(scope, sv.Value); err != nil {
					return nil, bad("line %d: sources.%s: %s; remove this entry", sk.Line, scope, errs.Message(err))
				}
				f.sources[scope] = sv.Value
			}
		case "cache":
			if err := f.sizeKey(path, "cache", "max_size", "20GiB", v, &f.maxCacheSize); err != nil {
				return nil, bad("%s", err)
			}
		case "pull":
			if err := f.sizeKey(path, "pull", "max_decompressed", "2GiB", v, &f.maxPullDecompressed); err != nil {
				return nil, bad("%s", err)
			}
		default:
			if ok, err := parseProvenanceKey(&f.provenance, k, v, baseDir, home); ok {
				if err != nil {
					return nil, bad("%s", err)
				}
				continue
			}
			hint := ""
			if near, ok := suggest.Nearest(k.Value, topKeys); ok {
				hint = "; did you mean " + near + "?"
			}
			f.warnings = append(f.warnings, fmt.Sprintf("%s: line %d: unknown key %q ignored%s", path, k.Line, k.Value, hint))
		}
	}
	sort.Strings(f.warnings)
	return f, nil
}
