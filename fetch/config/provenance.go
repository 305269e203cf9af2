package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
	"github.com/murmur-nexus/mur/internal/yamlnode"
)

// The provenance keys of config.yaml (see README "Provenance"):
//
//	provenance: prefer                  # require | prefer | off, for every scope
//	trusted_root: sigstore-roots.jsonl  # replaces mur's embedded trusted roots
//	trusted_keys: [{pem_file: team.pub}, {hint: 3f…, pem: "-----BEGIN PUBLIC KEY-----…"}]
//	scopes:
//	  acme:
//	    provenance: require
//	    allow_self_hosted: false
//	    signer_workflow: https://github.com/acme/murmur-tools/.github/workflows/release.yml@
//	    trusted_keys: [...]
//
// The home decides trust; a project may only tighten it. A cloned project's .murmur/config.yaml
// is untrusted input: from it mur takes provenance: require over prefer and prefer over off, a
// signer_workflow that narrows the home's, and allow_self_hosted: false. What would loosen the
// home's policy (a weaker mode, allow_self_hosted: true, a signer_workflow outside the home's) and
// trust material (trusted_root, trusted_keys) are ignored, with one warning each that names what
// the home says. A relative trusted_root is resolved against the home's folder.

// The provenance policies.
const (
	ProvenanceRequire = "require"
	ProvenancePrefer  = "prefer"
	ProvenanceOff     = "off"
)

// ProvenancePolicy is how a scope's bundles are looked for and checked.
type ProvenancePolicy struct {
	Mode            string // ProvenanceRequire, ProvenancePrefer or ProvenanceOff
	AllowSelfHosted bool
	SignerWorkflow  string
	Trust           provenance.Trust
}

// ProvenanceConfig is the merged provenance part of config.yaml.
type ProvenanceConfig struct {
	Mode        string
	TrustedRoot string
	TrustedKeys []provenance.TrustedKey
	Scopes      map[string]ScopeProvenance
	// TUFRepos replaces the TUF repositories the trusted roots refresh from (tuf.go).
	TUFRepos []provenance.TUFRepo
}

// ScopeProvenance is one scope's entry under scopes:.
type ScopeProvenance struct {
	Mode            string
	AllowSelfHosted *bool
	SignerWorkflow  string
	TrustedKeys     []provenance.TrustedKey
}

// ProvenanceFor is scope's policy: the home's (its scope entry over its file-wide keys, prefer by
// default), tightened by what the project's config says of the scope.
func (c *Config) ProvenanceFor(scope string) ProvenancePolicy {
	if c == nil {
		return ProvenancePolicy{Mode: ProvenancePrefer}
	}
	pol := policyOf(c.Provenance, scope)
	prj := c.ProjectProvenance
	mode := prj.Mode
	sp, hasScope := prj.Scopes[scope]
	if hasScope && sp.Mode != "" {
		mode = sp.Mode
	}
	if strictness(mode) > strictness(pol.Mode) {
		pol.Mode = mode
	}
	if hasScope {
		if sp.AllowSelfHosted != nil && !*sp.AllowSelfHosted {
			pol.AllowSelfHosted = false
		}
		if narrows(sp.SignerWorkflow, pol.SignerWorkflow) {
			pol.SignerWorkflow = sp.SignerWorkflow
		}
	}
	return pol
}

// strictness orders the modes: off < prefer < require; "" says nothing.
func strictness(mode string) int {
	switch mode {
	case ProvenanceOff:
		return 1
	case ProvenancePrefer:
		return 2
	case ProvenanceRequire:
		return 3
	}
	return 0
}

// narrows reports whether a signer_workflow w restricts signers at least as much as home's: any
// w when the home sets none, else a w that lies under home's prefix by the verifier's own rule (a
// prefix ends at a '/' or '@'), so that release.yml-other.yml@ does not pass for release.yml.
func narrows(w, home string) bool {
	return w != "" && (home == "" || provenance.WorkflowPrefix(w, home))
}

// loosening is the warnings for what a project's provenance keys would loosen, which
// ProvenanceFor ignores.
func loosening(home, prj ProvenanceConfig, path string) []string {
	var out []string
	warn := func(format string, args ...any) {
		out = append(out, path+": "+fmt.Sprintf(format, args...)+"; the home's config.yaml decides what this machine trusts, and a project may only tighten it")
	}
	if prj.TrustedRoot != "" {
		warn("trusted_root ignored (the home's %s holds)", orEmbedded(home.TrustedRoot))
	}
	if len(prj.TUFRepos) > 0 {
		warn("tuf_repositories ignored: only the home's config.yaml chooses where the trusted roots come from")
	}
	if len(prj.TrustedKeys) > 0 {
		warn("trusted_keys ignored: a project can't add a key this machine trusts; add it to $MURMUR_HOME/config.yaml if you trust it")
	}
	if prj.Mode != "" && strictness(prj.Mode) < strictness(orPrefer(home.Mode)) {
		warn("provenance: %s ignored (the home's provenance: %s holds)", prj.Mode, orPrefer(home.Mode))
	}
	scopes := make([]string, 0, len(prj.Scopes))
	for s := range prj.Scopes {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	for _, s := range scopes {
		sp := prj.Scopes[s]
		hp := policyOf(home, s)
		if sp.Mode != "" && strictness(sp.Mode) < strictness(hp.Mode) {
			warn("scopes.%s.provenance: %s ignored (the home's %s holds)", s, sp.Mode, hp.Mode)
		}
		if sp.AllowSelfHosted != nil && *sp.AllowSelfHosted && !hp.AllowSelfHosted {
			warn("scopes.%s.allow_self_hosted: true ignored (the home allows no self-hosted runner)", s)
		}
		if sp.SignerWorkflow != "" && !narrows(sp.SignerWorkflow, hp.SignerWorkflow) {
			warn("scopes.%s.signer_workflow %s ignored: it does not narrow the home's %s", s, sp.SignerWorkflow, hp.SignerWorkflow)
		}
		if len(sp.TrustedKeys) > 0 {
			warn("scopes.%s.trusted_keys ignored: a project can't add a key this machine trusts; add it to $MURMUR_HOME/config.yaml if you trust it", s)
		}
	}
	return out
}

func orPrefer(mode string) string {
	if mode == "" {
		return ProvenancePrefer
	}
	return mode
}

func orEmbedded(root string) string {
	if root == "" {
		return "embedded trusted roots"
	}
	return "trusted_root " + root
}

// policyOf is scope's policy from one file's keys: its scope entry over its file-wide keys.
func policyOf(pc ProvenanceConfig, scope string) ProvenancePolicy {
	pol := ProvenancePolicy{Mode: ProvenancePrefer}
	if pc.Mode != "" {
		pol.Mode = pc.Mode
	}
	pol.Trust.RootFile = pc.TrustedRoot
	pol.Trust.Keys = append(pol.Trust.Keys, pc.TrustedKeys...)
	if sp, ok := pc.Scopes[scope]; ok {
		if sp.Mode != "" {
			pol.Mode = sp.Mode
		}
		if sp.AllowSelfHosted != nil {
			pol.AllowSelfHosted = *sp.AllowSelfHosted
		}
		pol.SignerWorkflow = sp.SignerWorkflow
		pol.Trust.Keys = append(pol.Trust.Keys, sp.TrustedKeys...)
	}
	return pol
}

// ValidProvenanceMode checks a policy word, for --provenance.
func ValidProvenanceMode(mode string) error {
	switch mode {
	case ProvenanceRequire, ProvenancePrefer, ProvenanceOff:
		return nil
	}
	return errs.New(errs.Usage, "provenance must be require, prefer or off, found %q", mode)
}

// mergeProvenance lays over onto base, key by key.
func mergeProvenance(base *ProvenanceConfig, over ProvenanceConfig) {
	if over.Mode != "" {
		base.Mode = over.Mode
	}
	if over.TrustedRoot != "" {
		base.TrustedRoot = over.TrustedRoot
	}
	base.TrustedKeys = append(base.TrustedKeys, over.TrustedKeys...)
	if over.TUFRepos != nil {
		base.TUFRepos = over.TUFRepos
	}
	for scope, sp := range over.Scopes {
		if base.Scopes == nil {
			base.Scopes = map[string]ScopeProvenance{}
		}
		cur := base.Scopes[scope]
		if sp.Mode != "" {
			cur.Mode = sp.Mode
		}
		if sp.AllowSelfHosted != nil {
			cur.AllowSelfHosted = sp.AllowSelfHosted
		}
		if sp.SignerWorkflow != "" {
			cur.SignerWorkflow = sp.SignerWorkflow
		}
		cur.TrustedKeys = append(cur.TrustedKeys, sp.TrustedKeys...)
		base.Scopes[scope] = cur
	}
}

// parseProvenanceKey reads one top-level provenance key of a config file; ok is false for a key
// that is not one of them. home says whether the file is the home's, whose trusted_keys are read
// in full (pem_file opened, hints checked).
func parseProvenanceKey(pc *ProvenanceConfig, k, v *yaml.Node, baseDir string, home bool) (ok bool, err error) {
	switch k.Value {
	case "provenance":
		pc.Mode, err = provenanceMode(v, "provenance")
	case "trusted_root":
		if v.Kind != yaml.ScalarNode || v.Value == "" {
			return true, fmt.Errorf("line %d: trusted_root must be the path of a Sigstore trusted_root.json, found %s", v.Line, yamlnode.Describe(v))
		}
		pc.TrustedRoot = v.Value
		if !filepath.IsAbs(pc.TrustedRoot) {
			pc.TrustedRoot = filepath.Join(baseDir, pc.TrustedRoot)
		}
	case "trusted_keys":
		pc.TrustedKeys, err = trustedKeys(v, "trusted_keys", baseDir, home)
	case "tuf_repositories":
		pc.TUFRepos, err = tufRepositories(v, baseDir)
	case "scopes":
		if yamlnode.IsNull(v) {
			return true, nil
		}
		if v.Kind != yaml.MappingNode {
			return true, fmt.Errorf("line %d: scopes must map scopes to {provenance, allow_self_hosted, signer_workflow, trusted_keys}, found %s", v.Line, yamlnode.Describe(v))
		}
		pc.Scopes = map[string]ScopeProvenance{}
		for i := 0; i+1 < len(v.Content); i += 2 {
			sk, sv := v.Content[i], v.Content[i+1]
			if err := ref.ValidateSegment(sk.Value); err != nil {
				return true, fmt.Errorf("line %d: scopes key %q is not a scope: %s", sk.Line, sk.Value, errs.Message(err))
			}
			if _, dup := pc.Scopes[sk.Value]; dup {
				return true, fmt.Errorf("line %d: scopes.%s appears twice; keep one", sk.Line, sk.Value)
			}
			sp, err := scopeProvenance(sk.Value, sv, baseDir, home)
			if err != nil {
				return true, err
			}
			pc.Scopes[sk.Value] = sp
		}
	default:
		return false, nil
	}
	return true, err
}

func scopeProvenance(scope string, v *yaml.Node, baseDir string, home bool) (ScopeProvenance, error) {
	var sp ScopeProvenance
	if v.Kind != yaml.MappingNode {
		return sp, fmt.Errorf("line %d: scopes.%s must be a mapping, found %s", v.Line, scope, yamlnode.Describe(v))
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		what := "scopes." + scope + "." + k.Value
		var err error
		switch k.Value {
		case "provenance":
			sp.Mode, err = provenanceMode(val, what)
		case "allow_self_hosted":
			if val.Kind != yaml.ScalarNode || val.ShortTag() != "!!bool" {
				return sp, fmt.Errorf("line %d: %s must be true or false, found %s", val.Line, what, yamlnode.Describe(val))
			}
			b := val.Value == "true"
			sp.AllowSelfHosted = &b
		case "signer_workflow":
			// A prefix of the certificate's SAN: it must name a whole workflow URL, so that it
			// can't be satisfied by another repository whose name merely starts the same.
			if val.Kind != yaml.ScalarNode || !validSignerWorkflow(val.Value) {
				return sp, fmt.Errorf("line %d: %s must be a workflow URL prefix such as https://github.com/OWNER/REPO/.github/workflows/release.yml@, found %s", val.Line, what, yamlnode.Describe(val))
			}
			sp.SignerWorkflow = val.Value
		case "trusted_keys":
			sp.TrustedKeys, err = trustedKeys(val, what, baseDir, home)
		default:
			return sp, fmt.Errorf("line %d: unknown key %s; scopes take provenance, allow_self_hosted, signer_workflow and trusted_keys", k.Line, what)
		}
		if err != nil {
			return sp, err
		}
	}
	return sp, nil
}

func validSignerWorkflow(s string) bool {
	const base = "https://github.com/"
	if len(s) <= len(base) || s[:len(base)] != base {
		return false
	}
	// OWNER/REPO/ at least: a prefix that stops inside a repository name would match others.
	slashes := 0
	for _, c := range s[len(base):] {
		if c == '/' {
			slashes++
		}
	}
	return slashes >= 2
}

func provenanceMode(v *yaml.Node, what string) (string, error) {
	if v.Kind != yaml.ScalarNode || ValidProvenanceMode(v.Value) != nil {
		return "", fmt.Errorf("line %d: %s must be require, prefer or off, found %s", v.Line, what, yamlnode.Describe(v))
	}
	return v.Value, nil
}

// maxKeyFile bounds a pem_file: a PEM public key is a few hundred bytes.
const maxKeyFile = 64 << 10

// trustedKeys reads a trusted_keys list. Each entry gives the public key inline (pem:) or as a
// file (pem_file:, relative to the home's folder), and optionally the hint its bundles carry,
// which is computed from the key when omitted and refused when it names another key. A
// project's entries (home false) are only checked for shape: the home decides what this machine
// trusts, so a project's key files are never opened.
func trustedKeys(v *yaml.Node, what, baseDir string, home bool) ([]provenance.TrustedKey, error) {
	if yamlnode.IsNull(v) {
		return nil, nil
	}
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("line %d: %s must be a list of {pem_file: KEY.pub} or {pem: PUBLIC KEY PEM}, each with an optional hint, found %s", v.Line, what, yamlnode.Describe(v))
	}
	var out []provenance.TrustedKey
	for i, item := range v.Content {
		entry := fmt.Sprintf("%s[%d]", what, i)
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: %s must be {pem_file: KEY.pub} or {pem: PUBLIC KEY PEM}, with an optional hint, found %s", item.Line, entry, yamlnode.Describe(item))
		}
		var k provenance.TrustedKey
		var file string
		hintLine := item.Line
		for j := 0; j+1 < len(item.Content); j += 2 {
			fk, fv := item.Content[j], item.Content[j+1]
			if fv.Kind != yaml.ScalarNode || fv.Value == "" {
				return nil, fmt.Errorf("line %d: %s.%s must be a string, found %s", fv.Line, entry, fk.Value, yamlnode.Describe(fv))
			}
			switch fk.Value {
			case "hint":
				k.Hint, hintLine = fv.Value, fv.Line
			case "pem":
				k.PEM = fv.Value
			case "pem_file":
				file = fv.Value
			default:
				return nil, fmt.Errorf("line %d: unknown key %s.%s; a trusted key takes pem_file (or pem) and hint", fk.Line, entry, fk.Value)
			}
		}
		if (k.PEM == "") == (file == "") {
			return nil, fmt.Errorf("line %d: %s must give the public key once, as pem_file: KEY.pub or as pem: PUBLIC KEY PEM", item.Line, entry)
		}
		if !home {
			out = append(out, k)
			continue
		}
		where := "its pem"
		if file != "" {
			if !filepath.IsAbs(file) {
				file = filepath.Join(baseDir, file)
			}
			data, err := readKeyFile(file)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s.pem_file %s", item.Line, entry, err)
			}
			k.PEM, where = string(data), file
		}
		computed, err := provenance.KeyHint([]byte(k.PEM), "")
		if err != nil {
			return nil, fmt.Errorf("line %d: %s (%s): %w", item.Line, entry, where, err)
		}
		if k.Hint == "" {
			k.Hint = computed
		} else if _, err := provenance.KeyHint([]byte(k.PEM), k.Hint); err != nil {
			return nil, fmt.Errorf("line %d: %s (%s): %w", hintLine, entry, where, err)
		}
		out = append(out, k)
	}
	return out, nil
}

// readKeyFile reads a pem_file as trusted_root is read: a regular file only, of bounded size,
// and no refusal quotes what it holds.
func readKeyFile(path string) ([]byte, error) {
	data, err := safefile.ReadFile(path, maxKeyFile)
	var nr *safefile.NotRegularError
	switch {
	case err == nil:
		return data, nil
	case errors.As(err, &nr):
		return nil, fmt.Errorf("%s is %s, and mur reads a key only from a regular file; name the file itself", path, nr.Found)
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, fmt.Errorf("%s is over %d bytes, far more than a public key holds, so mur did not read it; name the KEY.pub that mur key generate or openssl pkey -pubout wrote", path, maxKeyFile)
	}
	return nil, fmt.Errorf("%s can't be read: %v; fix the path (a relative one is read from the home's folder)", path, errs.OSCause(err))
}
