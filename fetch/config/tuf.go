package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/yamlnode"
)

// tufRepositories reads the home's tuf_repositories: for an instance, the TUF repository its
// trusted root is refreshed from and the TUF root.json trusted first, in place of the ones mur
// knows. It exists for tests and private mirrors, and like trusted_root only the home may set it:
// a repository and a first root of a project's choosing would decide what the machine trusts.
//
//	tuf_repositories:
//	  github: {url: https://tuf.example.com, root: tuf-root.json}
func tufRepositories(v *yaml.Node, baseDir string) ([]provenance.TUFRepo, error) {
	if yamlnode.IsNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: tuf_repositories must map %s or %s to {url, root}, found %s", v.Line, provenance.InstancePublicGood, provenance.InstanceGitHub, yamlnode.Describe(v))
	}
	var out []provenance.TUFRepo
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Value != provenance.InstancePublicGood && k.Value != provenance.InstanceGitHub {
			return nil, fmt.Errorf("line %d: tuf_repositories key %q is not an instance; mur knows %s and %s", k.Line, k.Value, provenance.InstancePublicGood, provenance.InstanceGitHub)
		}
		for _, have := range out {
			if have.Instance == k.Value {
				return nil, fmt.Errorf("line %d: tuf_repositories.%s appears twice; keep one", k.Line, k.Value)
			}
		}
		var entry struct {
			URL  string `yaml:"url"`
			Root string `yaml:"root"`
		}
		if val.Kind != yaml.MappingNode || val.Decode(&entry) != nil || entry.URL == "" || entry.Root == "" || len(val.Content) != 4 {
			return nil, fmt.Errorf("line %d: tuf_repositories.%s must be {url: URL, root: PATH of the TUF root.json to trust first}, found %s", val.Line, k.Value, yamlnode.Describe(val))
		}
		if !validTUFURL(entry.URL) {
			return nil, fmt.Errorf("line %d: tuf_repositories.%s.url must be an https:// URL (http:// only on loopback), found %q", val.Line, k.Value, entry.URL)
		}
		if !filepath.IsAbs(entry.Root) {
			entry.Root = filepath.Join(baseDir, entry.Root)
		}
		out = append(out, provenance.TUFRepo{Instance: k.Value, URL: entry.URL, Root: entry.Root})
	}
	return out, nil
}

func validTUFURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		ip := net.ParseIP(u.Hostname())
		return u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
	}
	return false
}
