package ref

import (
	"sort"
	"strings"
)

// semver is a parsed semantic version (semver.org 2.0.0). Build metadata is dropped: it takes no
// part in precedence.
type semver struct {
	major, minor, patch string // decimal digits without leading zeros
	pre                 []string
}

// parseSemver accepts MAJOR.MINOR.PATCH with optional -PRERELEASE and +BUILD, and an optional
// leading 'v' because tags such as v1.2.0 are how many projects spell their releases. Shorthands
// such as 1.2 are not semantic versions and are refused, so that "latest" never guesses.
func parseSemver(v string) (semver, bool) {
	v = strings.TrimPrefix(v, "v")
	if b, build, ok := strings.Cut(v, "+"); ok {
		if !validIdents(build, false) {
			return semver{}, false
		}
		v = b
	}
	var s semver
	core, pre, hasPre := strings.Cut(v, "-")
	if hasPre {
		if !validIdents(pre, true) {
			return semver{}, false
		}
		s.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return semver{}, false
	}
	for _, p := range parts {
		if !isNumeric(p) || (len(p) > 1 && p[0] == '0') {
			return semver{}, false
		}
	}
	s.major, s.minor, s.patch = parts[0], parts[1], parts[2]
	return s, true
}

// validIdents checks dot-separated identifiers of [0-9A-Za-z-]; numeric pre-release identifiers
// must not have leading zeros.
func validIdents(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return false
			}
		}
		if pre && isNumeric(id) && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

func isNumeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// compareNum compares decimal strings without leading zeros, of any length, so that huge
// numbers neither overflow nor compare wrongly.
func compareNum(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func (a semver) compare(b semver) int {
	if c := compareNum(a.major, b.major); c != 0 {
		return c
	}
	if c := compareNum(a.minor, b.minor); c != 0 {
		return c
	}
	if c := compareNum(a.patch, b.patch); c != 0 {
		return c
	}
	// A pre-release ranks below its release.
	switch {
	case len(a.pre) == 0 && len(b.pre) == 0:
		return 0
	case len(a.pre) == 0:
		return 1
	case len(b.pre) == 0:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		xn, yn := isNumeric(x), isNumeric(y)
		var c int
		switch {
		case xn && yn:
			c = compareNum(x, y)
		case xn:
			c = -1 // numeric identifiers rank below alphanumeric ones
		case yn:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// HighestSemver picks what "latest" means: the highest release among versions, or, only when
// there is no release at all, the highest pre-release (2.0.0-rc.1 never beats 1.2.0). Versions
// that are not semantic versions are ignored; when none is one, it returns false and the caller
// asks for an explicit version. Among versions of equal precedence (1.0.0+a and 1.0.0+b, or
// v1.0.0 and 1.0.0) the one that sorts last as a string wins, so the answer never depends on the
// order of the input.
func HighestSemver(versions []string) (string, bool) {
	best, found := "", false
	var bestS semver
	for _, v := range versions {
		s, ok := parseSemver(v)
		if !ok {
			continue
		}
		if !found {
			best, bestS, found = v, s, true
			continue
		}
		if isRelease, bestIsRelease := len(s.pre) == 0, len(bestS.pre) == 0; isRelease != bestIsRelease {
			if isRelease {
				best, bestS = v, s
			}
			continue
		}
		if c := s.compare(bestS); c > 0 || c == 0 && v > best {
			best, bestS = v, s
		}
	}
	return best, found
}

// TagFromVersion turns a version into an OCI tag. Tags can't hold '+', so it becomes '_'
// (SPEC section 7); every other version character is legal in a tag.
func TagFromVersion(v string) string { return strings.ReplaceAll(v, "+", "_") }

// VersionFromTag is the inverse of TagFromVersion. It is exact for versions without '_'; a
// version that already held '_' can't be told apart from one that held '+', so stores should
// prefer the version annotation of the manifest when there is one.
func VersionFromTag(tag string) string { return strings.ReplaceAll(tag, "_", "+") }

// NewestFirst returns the semantic versions among versions, newest first (releases and
// pre-releases in one order), followed by the others in the order given.
func NewestFirst(versions []string) []string {
	type sv struct {
		v string
		s semver
	}
	var sem []sv
	var other []string
	for _, v := range versions {
		if s, ok := parseSemver(v); ok {
			sem = append(sem, sv{v, s})
		} else {
			other = append(other, v)
		}
	}
	sort.SliceStable(sem, func(i, j int) bool {
		c := sem[i].s.compare(sem[j].s)
		return c > 0 || c == 0 && sem[i].v > sem[j].v
	})
	out := make([]string, 0, len(versions))
	for _, x := range sem {
		out = append(out, x.v)
	}
	return append(out, other...)
}

// Newer reports whether semantic version a ranks above b; false when either is not one.
func Newer(a, b string) bool {
	sa, ok := parseSemver(a)
	sb, ok2 := parseSemver(b)
	return ok && ok2 && sa.compare(sb) > 0
}
