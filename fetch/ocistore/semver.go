package ocistore

import "strings"

// highestSemver is the highest of versions in semantic-version order (semver.org 2.0.0), and
// false when none of them is a semantic version. Build metadata takes no part in the order; of
// two versions that differ only there, the first one listed wins, so the result is stable.
func highestSemver(versions []string) (string, bool) {
	best, bestV, found := "", semver{}, false
	for _, s := range versions {
		v, ok := parseSemver(s)
		if !ok {
			continue
		}
		if !found || v.compare(bestV) > 0 {
			best, bestV, found = s, v, true
		}
	}
	return best, found
}

type semver struct {
	core [3]string // numeric, without leading zeros
	pre  []string
}

func parseSemver(s string) (semver, bool) {
	if i := strings.IndexByte(s, '+'); i >= 0 {
		build := s[i+1:]
		s = s[:i]
		if !validIdents(build, false) {
			return semver{}, false
		}
	}
	var v semver
	if i := strings.IndexByte(s, '-'); i >= 0 {
		pre := s[i+1:]
		s = s[:i]
		if !validIdents(pre, true) {
			return semver{}, false
		}
		v.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return semver{}, false
	}
	for i, p := range parts {
		if !isNumeric(p) || (len(p) > 1 && p[0] == '0') {
			return semver{}, false
		}
		v.core[i] = p
	}
	return v, true
}

func validIdents(s string, noLeadingZero bool) bool {
	if s == "" {
		return false
	}
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
		if noLeadingZero && isNumeric(id) && len(id) > 1 && id[0] == '0' {
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

// compareNumeric compares decimal strings without leading zeros, of any length.
func compareNumeric(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func (a semver) compare(b semver) int {
	for i := range a.core {
		if c := compareNumeric(a.core[i], b.core[i]); c != 0 {
			return c
		}
	}
	// A version without a pre-release is higher than one with.
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
			c = compareNumeric(x, y)
		case xn:
			c = -1
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
