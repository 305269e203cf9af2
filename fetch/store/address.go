package store

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/yamlnode"
)

// Store addresses as config.yaml and --store write them: their grammar, and the {url: …} form.

// repoPath is the OCI distribution grammar for repository names, which PREFIX must follow.
var repoPath = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)

var hostLabel = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// CleanStoreAddress is the spelling of a store address that mur keeps and prints: without the
// trailing slash people often write (oci://registry:5000/murmur/) and with a layout's path
// cleaned, so that two spellings of one store are one store.
func CleanStoreAddress(s string) string {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, SchemeOCI); ok {
		return SchemeOCI + strings.TrimRight(rest, "/")
	}
	if p, ok := strings.CutPrefix(s, SchemeOCILayout); ok && p != "" {
		return SchemeOCILayout + filepath.Clean(p)
	}
	return s
}

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

// Entry is one entry of stores (or the mirror) as written.
type Entry struct {
	Addr     string
	Plain    bool
	Fallback Fallback
}

// ParseEntry reads one entry of stores, or the mirror: an address, or {url: ADDRESS,
// plain_http: BOOL, fallback: not-found | any-error}. key names it in messages.
func ParseEntry(item *yaml.Node, key, path string) (it Entry, warnings []string, err error) {
	switch item.Kind {
	case yaml.ScalarNode:
		addr := CleanStoreAddress(item.Value)
		if err := ValidateStoreAddress(addr); err != nil {
			return it, nil, fmt.Errorf("line %d: %s: %s", item.Line, key, errs.Message(err))
		}
		return Entry{Addr: addr}, nil, nil
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
	it.Addr = CleanStoreAddress(urlNode.Value)
	if err := ValidateStoreAddress(it.Addr); err != nil {
		return it, nil, fmt.Errorf("line %d: %s.url: %s", urlNode.Line, key, errs.Message(err))
	}
	if plainNode != nil {
		if plainNode.Kind != yaml.ScalarNode || plainNode.ShortTag() != "!!bool" {
			return it, nil, fmt.Errorf("line %d: %s.plain_http must be true or false, found %s", plainNode.Line, key, yamlnode.Describe(plainNode))
		}
		it.Plain = strings.EqualFold(plainNode.Value, "true")
		if it.Plain && !strings.HasPrefix(urlNode.Value, SchemeOCI) {
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
		it.Fallback = fb
	}
	return it, warnings, nil
}

// ResolveStore makes a relative oci-layout: path absolute against baseDir, as config.Load does for the
// config files; a command resolves its --store against the current folder the same way.
func ResolveStore(addr, baseDir string) string {
	p, ok := strings.CutPrefix(addr, SchemeOCILayout)
	if !ok || filepath.IsAbs(p) {
		return addr
	}
	return SchemeOCILayout + filepath.Join(baseDir, p)
}

// Store address schemes.
const (
	SchemeOCI       = "oci://"
	SchemeOCILayout = "oci-layout:"
)

// IsLocal reports whether st is on this machine's disk (an oci-layout: folder or a packed file),
// so that a pull with the network off may still read it.
func IsLocal(st Store) bool {
	if _, ok := st.(*FileStore); ok {
		return true
	}
	return strings.HasPrefix(st.String(), SchemeOCILayout)
}
