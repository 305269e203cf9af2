package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/yamlnode"
	"github.com/murmur-nexus/mur/lock"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/safefile"
	"github.com/murmur-nexus/mur/internal/ref"
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

// Store address schemes.
const (
	SchemeOCI       = "oci://"
	SchemeOCILayout = "oci-layout:"
)

// Config is the merged configuration of the home and the project.
type Config struct {
	// Stores are store addresses in the order they are tried: the project's, then the home's.
	Stores []string
	// Sources maps a scope to the `github:OWNER/REPO` that serves it.
	Sources map[string]string
	// MaxCacheSize is cache.max_size in bytes; 0 when neither file sets it.
	MaxCacheSize int64
	// PlainHTTP holds the oci:// stores (and the mirror) written as {url: …, plain_http: true}:
	// registries the user chose to reach over plain HTTP (never chosen for them off loopback).
	PlainHTTP map[string]bool
	// Fallbacks holds the stores written as {url: …, fallback: any-error} or not-found.
	Fallbacks map[string]Fallback
	// Mirror is the registry pulls write through to, "" for none; MirrorRequired makes a failed
	// write-through fail the command.
	Mirror         string
	MirrorRequired bool
	// Warnings name keys that were ignored, with their file, for the command to print.
	Warnings []string
}

// LoadConfig reads homeConfigPath and, when projectDir is not empty, projectDir/.murmur/config.yaml,
// and merges them. A missing file counts as an empty one.
func LoadConfig(homeConfigPath, projectDir string) (*Config, error) {
	c := &Config{Sources: map[string]string{}, PlainHTTP: map[string]bool{}, Fallbacks: map[string]Fallback{}}
	var project, user *configFile
	var err error
	if projectDir != "" {
		abs, aerr := filepath.Abs(projectDir)
		if aerr != nil {
			return nil, errs.Wrap(aerr, errs.IO, "the project folder %q can't be made absolute: %v", projectDir, aerr)
		}
		if project, err = readConfigFile(filepath.Join(abs, ProjectFile), abs); err != nil {
			return nil, err
		}
	}
	if homeConfigPath != "" {
		abs, aerr := filepath.Abs(homeConfigPath)
		if aerr != nil {
			return nil, errs.Wrap(aerr, errs.IO, "the config file %q can't be made absolute: %v", homeConfigPath, aerr)
		}
		if user, err = readConfigFile(abs, filepath.Dir(abs)); err != nil {
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

// repoPath is the OCI distribution grammar for repository names, which PREFIX must follow.
var repoPath = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)

var hostLabel = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// ValidateStoreAddress accepts `oci://HOST[:PORT]/PREFIX` and `oci-layout:PATH`.
func ValidateStoreAddress(s string) error {
	switch {
	case strings.HasPrefix(s, SchemeOCI):
		if err := validateOCI(strings.TrimPrefix(s, SchemeOCI)); err != nil {
			return errs.New(errs.Usage, "store %q is not a valid oci://HOST[:PORT]/PREFIX address: %v; for example oci://registry.internal:5000/murmur", s, err)
		}
		return nil
	case strings.HasPrefix(s, SchemeOCILayout):
		p := strings.TrimPrefix(s, SchemeOCILayout)
		if p == "" {
			return errs.New(errs.Usage, "store %q has no path after oci-layout:; write oci-layout:/path/to/folder", s)
		}
		if strings.ContainsRune(p, 0) {
			return errs.New(errs.Usage, "store %q holds a NUL byte in its path", s)
		}
		return nil
	}
	return errs.New(errs.Usage, "store %q is neither oci://HOST[:PORT]/PREFIX nor oci-layout:PATH; for example oci://registry.internal:5000/murmur or oci-layout:/srv/murmur-store", s)
}

func validateOCI(rest string) error {
	hostport, prefix, ok := strings.Cut(rest, "/")
	if !ok || prefix == "" {
		return errors.New("it has no /PREFIX after the host")
	}
	if strings.ContainsAny(rest, "?#@") {
		return errors.New("it may not hold a query, a fragment or credentials (credentials come from the docker config)")
	}
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.Index(hostport, "]")
		if end < 0 {
			return errors.New("its IPv6 host has no closing ]")
		}
		host, port = hostport[1:end], hostport[end+1:]
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return fmt.Errorf("%q is not an IPv6 address", host)
		}
		if port != "" && !strings.HasPrefix(port, ":") {
			return fmt.Errorf("unexpected %q after the IPv6 host", port)
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(hostport, ":") {
			return errors.New("its port is empty")
		}
	} else {
		if h, p, hasPort := strings.Cut(hostport, ":"); hasPort {
			host, port = h, p
			if port == "" {
				return errors.New("its port is empty")
			}
		}
		if host == "" {
			return errors.New("its host is empty")
		}
		if len(host) > 253 {
			return errors.New("its host is longer than 253 characters")
		}
		for _, label := range strings.Split(host, ".") {
			if !hostLabel.MatchString(label) {
				return fmt.Errorf("host %q is not a valid host name", host)
			}
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
	}
	if !repoPath.MatchString(prefix) {
		return fmt.Errorf("prefix %q is not a valid repository path (lowercase a-z, 0-9, separators . _ - between them, segments joined by /)", prefix)
	}
	return nil
}

// file is one parsed config file, already validated and with its paths resolved.
type configFile struct {
	stores         []string
	plainHTTP      map[string]bool
	fallbacks      map[string]Fallback
	sources        map[string]string
	maxCacheSize   int64
	mirror         string
	mirrorRequired *bool
	warnings       []string
}

// maxConfigBytes caps what is read of a config file, which holds a few lines.
const maxConfigBytes = 1 << 20

func readConfigFile(path, baseDir string) (*configFile, error) {
	data, err := safefile.ReadProject(path, maxConfigBytes, errs.InvalidConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parseConfig(data, path, baseDir)
}

func parseConfig(data []byte, path, baseDir string) (*configFile, error) {
	bad := func(format string, args ...any) error {
		return errs.New(errs.InvalidConfig, "%s: %s", path, fmt.Sprintf(format, args...))
	}
	f := &configFile{sources: map[string]string{}, plainHTTP: map[string]bool{}, fallbacks: map[string]Fallback{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // an empty file is an empty config
		}
		return nil, errs.Wrap(err, errs.InvalidConfig, "%s is not valid YAML: %v; fix the file or move it aside", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, bad("line %d: a second YAML document starts here; keep a single one", max(extra.Line, 1))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
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
			if v.Kind != yaml.SequenceNode {
				return nil, bad("line %d: stores must be a list of store addresses, found %s", v.Line, yamlnode.Describe(v))
			}
			for j, item := range v.Content {
				it, warns, err := parseStoreItem(item, fmt.Sprintf("stores[%d]", j), path)
				if err != nil {
					return nil, bad("%s", err)
				}
				f.warnings = append(f.warnings, warns...)
				addr := ResolveStore(it.addr, baseDir)
				f.stores = append(f.stores, addr)
				if it.plain {
					f.plainHTTP[addr] = true
				}
				if it.fallback != "" {
					f.fallbacks[addr] = it.fallback
				}
			}
		case "mirror":
			if yamlnode.IsNull(v) {
				continue
			}
			it, warns, err := parseStoreItem(v, "mirror", path)
			if err != nil {
				return nil, bad("%s", err)
			}
			f.warnings = append(f.warnings, warns...)
			if !strings.HasPrefix(it.addr, SchemeOCI) {
				return nil, bad("line %d: mirror must be a registry, oci://HOST[:PORT]/PREFIX, found %s; a folder is filled with 'mur warm --layout DIR'", v.Line, it.addr)
			}
			if it.fallback != "" {
				return nil, bad("line %d: mirror takes no fallback: it is written to, not read from; list it under stores: to read from it", v.Line)
			}
			f.mirror = it.addr
			if it.plain {
				f.plainHTTP[it.addr] = true
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
				switch {
				case scope == ref.ScopeLocal:
					return nil, bad("line %d: sources.local: scope local is reserved for files on disk and is never served by a source; remove this entry", sk.Line)
				case scope == ref.ScopeMurmur && sv.Value != lock.MurmurSource:
					return nil, bad("line %d: sources.murmur: scope murmur is reserved and always served by %s, found %q; remove this entry", sk.Line, lock.MurmurSource, sv.Value)
				}
				f.sources[scope] = sv.Value
			}
		case "cache":
			if yamlnode.IsNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return nil, bad("line %d: cache must be a mapping such as { max_size: 20GiB }, found %s", v.Line, yamlnode.Describe(v))
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				ck, cv := v.Content[j], v.Content[j+1]
				if ck.Value != "max_size" {
					f.warnings = append(f.warnings, fmt.Sprintf("%s: line %d: unknown key cache.%s ignored", path, ck.Line, ck.Value))
					continue
				}
				if cv.Kind != yaml.ScalarNode {
					return nil, bad("line %d: cache.max_size must be a size such as 20GiB, found %s", cv.Line, yamlnode.Describe(cv))
				}
				n, err := cas.ParseSize(cv.Value)
				if err != nil {
					return nil, bad("line %d: cache.max_size: %s", cv.Line, errs.Message(err))
				}
				f.maxCacheSize = n
			}
		default:
			f.warnings = append(f.warnings, fmt.Sprintf("%s: line %d: unknown key %q ignored", path, k.Line, k.Value))
		}
	}
	sort.Strings(f.warnings)
	return f, nil
}

// storeItem is one entry of stores (or the mirror) as written.
type storeItem struct {
	addr     string
	plain    bool
	fallback Fallback
}

// parseStoreItem reads one entry of stores, or the mirror: an address, or {url: ADDRESS,
// plain_http: BOOL, fallback: not-found | any-error}. key names it in messages.
func parseStoreItem(item *yaml.Node, key, path string) (it storeItem, warnings []string, err error) {
	switch item.Kind {
	case yaml.ScalarNode:
		if err := ValidateStoreAddress(item.Value); err != nil {
			return it, nil, fmt.Errorf("line %d: %s: %s", item.Line, key, errs.Message(err))
		}
		return storeItem{addr: item.Value}, nil, nil
	case yaml.MappingNode:
	default:
		return it, nil, fmt.Errorf("line %d: %s must be an address or {url: ADDRESS, plain_http: true, fallback: any-error}, found %s", item.Line, key, yamlnode.Describe(item))
	}
	var urlNode, plainNode, fallbackNode *yaml.Node
	for i := 0; i+1 < len(item.Content); i += 2 {
		k, v := item.Content[i], item.Content[i+1]
		switch k.Value {
		case "url":
			urlNode = v
		case "plain_http":
			plainNode = v
		case "fallback":
			fallbackNode = v
		default:
			warnings = append(warnings, fmt.Sprintf("%s: line %d: unknown key %q in %s ignored", path, k.Line, k.Value, key))
		}
	}
	if urlNode == nil || urlNode.Kind != yaml.ScalarNode || urlNode.Value == "" {
		return it, nil, fmt.Errorf("line %d: %s has no url; write {url: oci://HOST[:PORT]/PREFIX, plain_http: true}", item.Line, key)
	}
	if err := ValidateStoreAddress(urlNode.Value); err != nil {
		return it, nil, fmt.Errorf("line %d: %s.url: %s", urlNode.Line, key, errs.Message(err))
	}
	it.addr = urlNode.Value
	if plainNode != nil {
		if plainNode.Kind != yaml.ScalarNode || plainNode.ShortTag() != "!!bool" {
			return it, nil, fmt.Errorf("line %d: %s.plain_http must be true or false, found %s", plainNode.Line, key, yamlnode.Describe(plainNode))
		}
		it.plain = strings.EqualFold(plainNode.Value, "true")
		if it.plain && !strings.HasPrefix(urlNode.Value, SchemeOCI) {
			return it, nil, fmt.Errorf("line %d: %s.plain_http applies to oci:// registries, and %s is a folder; remove it", plainNode.Line, key, urlNode.Value)
		}
	}
	if fallbackNode != nil {
		if fallbackNode.Kind != yaml.ScalarNode {
			return it, nil, fmt.Errorf("line %d: %s.fallback must be not-found or any-error, found %s", fallbackNode.Line, key, yamlnode.Describe(fallbackNode))
		}
		fb, err := ParseFallback(fallbackNode.Value)
		if err != nil {
			return it, nil, fmt.Errorf("line %d: %s.%s", fallbackNode.Line, key, errs.Message(err))
		}
		it.fallback = fb
	}
	return it, warnings, nil
}

// ResolveStore makes a relative oci-layout: path absolute against baseDir, as LoadConfig does for the
// config files; a command resolves its --store against the current folder the same way.
func ResolveStore(addr, baseDir string) string {
	p, ok := strings.CutPrefix(addr, SchemeOCILayout)
	if !ok || filepath.IsAbs(p) {
		return addr
	}
	return SchemeOCILayout + filepath.Join(baseDir, p)
}
