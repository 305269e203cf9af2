// Package ref parses and formats the names users type: scoped artifact names, versions,
// platforms, references and SHA-256 digests (SPEC section 1).
package ref

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Reserved scopes: no GitHub owner can claim them.
const (
	ScopeLocal  = "local"  // artifacts read from a file on disk, never asked of any source
	ScopeMurmur = "murmur" // served by github:murmur-nexus/default-artifacts
)

// Name is a scoped artifact name, `<scope>/<name>`.
type Name struct {
	Scope string
	Name  string
}

// String formats the name as `scope/name`, the form ParseName reads.
func (n Name) String() string { return n.Scope + "/" + n.Name }

// ParseName parses `scope/name`. A bare name is refused with a hint that shows the scoped form.
func ParseName(s string) (Name, error) {
	scope, name, ok := strings.Cut(s, "/")
	if !ok {
		if err := validSegment(s); err == nil {
			return Name{}, errs.New(errs.Usage, "artifact name %q has no scope; write it as <scope>/%s, for example acme/%s", s, s, s)
		}
		return Name{}, errs.New(errs.Usage, "artifact name %q is not of the form <scope>/<name>%s", s, lowerHint(s))
	}
	if err := validSegment(scope); err != nil {
		return Name{}, errs.New(errs.Usage, "artifact name %q: scope %v%s", s, err, lowerHint(s))
	}
	if err := validSegment(name); err != nil {
		return Name{}, errs.New(errs.Usage, "artifact name %q: name %v%s", s, err, lowerHint(s))
	}
	return Name{Scope: scope, Name: name}, nil
}

// lowerHint helps with the most common mistake, a GitHub owner typed with its capitals: scopes are
// the lowercased login.
func lowerHint(s string) string {
	if l := strings.ToLower(s); l != s {
		if _, err := ParseName(l); err == nil {
			return fmt.Sprintf("; names are lowercase: write %s", l)
		}
	}
	return ""
}

// ValidateSegment checks one segment of a name: 1 to 100 of a-z, 0-9 and '-', not at either end.
func ValidateSegment(s string) error {
	if err := validSegment(s); err != nil {
		return errs.New(errs.Usage, "%q %v", s, err)
	}
	return nil
}

func validSegment(s string) error {
	if len(s) < 1 || len(s) > 100 {
		return fmt.Errorf("must be 1 to 100 characters, found %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("may hold only a-z, 0-9 and '-', found %q", c)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return fmt.Errorf("must not start or end with '-'")
	}
	return nil
}

// Latest is the version that asks for the highest published one.
const Latest = "latest"

// IsReservedVersion reports whether v is one of latest, stable and edge, in any case.
func IsReservedVersion(v string) bool {
	switch strings.ToLower(v) {
	case "latest", "stable", "edge":
		return true
	}
	return false
}

// ValidateVersion checks a version that may be published or pinned.
func ValidateVersion(v string) error {
	if IsReservedVersion(v) {
		return errs.New(errs.Usage, "version %q is reserved and can't be published or pinned; use an exact version such as 1.2.0", v)
	}
	if IsRange(v) {
		return errs.New(errs.Usage, "version %q is a range, and version ranges aren't supported: pin an exact version or use latest", v)
	}
	if len(v) < 1 || len(v) > 128 {
		return errs.New(errs.Usage, "version %q must be 1 to 128 characters", v)
	}
	if v[0] == '.' || v[0] == '-' {
		return errs.New(errs.Usage, "version %q must not start with '.' or '-'", v)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			return errs.New(errs.Usage, "version %q may hold only A-Z a-z 0-9 . _ + -, found %q", v, c)
		}
	}
	return nil
}

// IsRange reports whether v is written as a version range (^1.2, ~1.2, >=1.0, 1.x, *), which
// cargo and npm accept and mur does not: a pin is one exact version.
func IsRange(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	if strings.ContainsAny(v[:1], "^~<>=*") || strings.Contains(v, "||") {
		return true
	}
	for _, part := range strings.Split(v, ".") {
		if part == "x" || part == "X" || part == "*" {
			return true
		}
	}
	return false
}

// Platforms.
const (
	PlatformAny = "any"
)

// KnownPlatforms lists every platform tag besides "any".
var KnownPlatforms = []string{"linux-x86_64", "linux-aarch64", "darwin-x86_64", "darwin-aarch64"}

// ValidatePlatform accepts "any" and the known platform tags.
func ValidatePlatform(p string) error {
	if p == PlatformAny {
		return nil
	}
	for _, k := range KnownPlatforms {
		if p == k {
			return nil
		}
	}
	return errs.New(errs.Usage, "platform %q is not one of any, %s", p, strings.Join(KnownPlatforms, ", "))
}

// NormalizePlatform turns the OCI spelling of a platform (linux/arm64, darwin/amd64) and Go's
// architecture names into mur's tag (linux-aarch64, darwin-x86_64); anything else comes back as
// given, for ValidatePlatform to judge.
func NormalizePlatform(p string) string {
	os, arch, ok := strings.Cut(p, "/")
	if !ok {
		os, arch, ok = strings.Cut(p, "-")
	}
	if !ok || (os != "linux" && os != "darwin") {
		return p
	}
	switch arch {
	case "amd64", "x86_64":
		return os + "-x86_64"
	case "arm64", "aarch64", "arm64/v8":
		return os + "-aarch64"
	}
	return p
}

// HostPlatform is the platform tag of the running machine, or "any" where mur knows no tag.
func HostPlatform() string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if arch == "" || (runtime.GOOS != "linux" && runtime.GOOS != "darwin") {
		return PlatformAny
	}
	return runtime.GOOS + "-" + arch
}

// Ref is what a user types: `scope/name@version`, `scope/name` (latest), or a path to a
// `.mur.zip` file (scope local).
type Ref struct {
	Name    Name
	Version string // "latest" when none was given
	Path    string // set only for a file reference
}

// IsFile reports whether the reference names a packed file on disk.
func (r Ref) IsFile() bool { return r.Path != "" }

// String formats the reference as ParseRef reads it: the path, or `scope/name@version`.
func (r Ref) String() string {
	if r.IsFile() {
		return r.Path
	}
	return r.Name.String() + "@" + r.Version
}

// ParseRef parses a reference. Anything ending in .mur.zip is a file reference (scope local);
// everything else must be `scope/name` or `scope/name@version`. A version of "latest" in any case
// is normalised to Latest; "stable" and "edge" are refused.
func ParseRef(s string) (Ref, error) {
	if strings.HasSuffix(s, ".mur.zip") {
		return Ref{Name: Name{Scope: ScopeLocal}, Version: "", Path: s}, nil
	}
	namepart, version, hasAt := strings.Cut(s, "@")
	n, err := ParseName(namepart)
	if err != nil {
		return Ref{}, err
	}
	if !hasAt {
		return Ref{Name: n, Version: Latest}, nil
	}
	if strings.EqualFold(version, Latest) {
		return Ref{Name: n, Version: Latest}, nil
	}
	if err := ValidateVersion(version); err != nil {
		return Ref{}, errs.New(errs.Usage, "reference %q: %s", s, errs.Message(err))
	}
	return Ref{Name: n, Version: version}, nil
}

// ParseDigest parses `sha256:<64 lowercase hex>`. No other algorithm is accepted.
func ParseDigest(s string) (digest.Digest, error) {
	d, err := digest.Parse(s)
	if err != nil {
		return "", errs.Wrap(err, errs.Usage, "digest %q is not of the form sha256:<64 lowercase hex>: %v", s, err)
	}
	if d.Algorithm() != digest.SHA256 {
		return "", errs.New(errs.Usage, "digest %q uses %s; mur accepts only sha256", s, d.Algorithm())
	}
	return d, nil
}

// DigestFromHex turns the bare hex that murmur.lock and the index hold into a digest.
func DigestFromHex(hex string) (digest.Digest, error) {
	return ParseDigest("sha256:" + hex)
}
