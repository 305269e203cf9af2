package ref

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// isSemver and compareSemver are what HighestSemver builds on: parsing, and precedence, where a
// version that is not a semantic version ranks below every one that is.
func isSemver(v string) bool {
	_, ok := parseSemver(v)
	return ok
}

func compareSemver(a, b string) int {
	sa, oka := parseSemver(a)
	sb, okb := parseSemver(b)
	switch {
	case !oka && !okb:
		return 0
	case !oka:
		return -1
	case !okb:
		return 1
	}
	return sa.compare(sb)
}

func TestIsSemver(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"1.2.3": true, "v1.2.3": true, "0.0.0": true, "1.2.3-rc.1": true, "1.2.3+build.7": true,
		"1.2.3-alpha-1.0+x-y": true, "10.20.30": true, "99999999999999999999.0.0": true,
		"1.2": false, "1": false, "01.2.3": false, "1.02.3": false, "1.2.03": false, "1.2.3-": false,
		"1.2.3-01": false, "1.2.3+": false, "1.2.3-a..b": false, "1.2.3_build": false, "": false,
		"vv1.2.3": false, "1.2.3.4": false, "latest": false, "1.2.x": false, "1.2.3-rc_1": false,
	} {
		if got := isSemver(v); got != want {
			t.Errorf("IsSemver(%q) = %v, want %v", v, got, want)
		}
	}
}

// ordered lists versions in strictly increasing precedence (semver.org section 11's example plus
// numeric edge cases).
var ordered = []string{
	"0.9.9",
	"1.0.0-alpha",
	"1.0.0-alpha.1",
	"1.0.0-alpha.beta",
	"1.0.0-beta",
	"1.0.0-beta.2",
	"1.0.0-beta.11",
	"1.0.0-rc.1",
	"1.0.0",
	"1.0.1",
	"1.2.0",
	"1.10.0",
	"2.0.0",
	"10.0.0",
	"99999999999999999999.0.0",
}

func TestCompareSemver(t *testing.T) {
	t.Parallel()
	for i := range ordered {
		for j := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareSemver(ordered[i], ordered[j]); got != want {
				t.Errorf("compareSemver(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"1.0.0+a", "1.0.0+b", 0},
		{"v1.0.0", "1.0.0", 0},
		{"nightly", "0.0.1", -1},
		{"0.0.1", "nightly", 1},
		{"nightly", "2024", 0},
	} {
		if got := compareSemver(tt.a, tt.b); got != tt.want {
			t.Errorf("compareSemver(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestHighestSemver(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	for range 20 {
		shuffled := append([]string{"nightly", "1.2", "2024-01-01"}, ordered...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got, ok := HighestSemver(shuffled); !ok || got != ordered[len(ordered)-1] {
			t.Fatalf("HighestSemver(%q) = %q, %v", shuffled, got, ok)
		}
	}
	for _, tt := range []struct {
		in   []string
		want string
		ok   bool
	}{
		{nil, "", false},
		{[]string{"nightly", "1.2", "main"}, "", false},
		{[]string{"1.0.0", "1.1.0-rc.1"}, "1.0.0", true},
		{[]string{"2.0.0-rc.1", "1.2.0"}, "1.2.0", true},
		{[]string{"1.2.0", "2.0.0-rc.1"}, "1.2.0", true},
		{[]string{"2.0.0-rc.1", "2.0.0-beta.2", "nightly"}, "2.0.0-rc.1", true},
		{[]string{"v1.0.0", "1.0.0"}, "v1.0.0", true},
		{[]string{"1.0.0", "v1.0.0"}, "v1.0.0", true},
		{[]string{"1.0.0+b", "1.0.0+a"}, "1.0.0+b", true},
		{[]string{"1.0.0+a", "1.0.0+b"}, "1.0.0+b", true},
	} {
		got, ok := HighestSemver(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("HighestSemver(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestVersionRangesAreRefused(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"^1.2", "~1.2", ">=1.0.0", "1.x", "*", "1.2.*"} {
		err := ValidateVersion(v)
		if err == nil || !strings.Contains(err.Error(), "version ranges aren't supported: pin an exact version or use latest") {
			t.Errorf("ValidateVersion(%q) = %v", v, err)
		}
	}
	if _, err := ParseRef("acme/grep@^1.2"); err == nil || !strings.Contains(err.Error(), "version ranges aren't supported") {
		t.Errorf("ParseRef of a range: %v", err)
	}
	for _, v := range []string{"1.2.0", "1.0.0-x.1", "2024.1"} {
		if IsRange(v) {
			t.Errorf("IsRange(%q)", v)
		}
	}
}

func TestNewestFirst(t *testing.T) {
	t.Parallel()
	got := strings.Join(NewestFirst([]string{"1.0.0", "nightly", "1.10.0", "1.2.0-rc.1", "1.2.0"}), " ")
	if got != "1.10.0 1.2.0 1.2.0-rc.1 1.0.0 nightly" {
		t.Fatal(got)
	}
}

func TestTagFromVersion(t *testing.T) {
	t.Parallel()
	for v, tag := range map[string]string{"1.2.0": "1.2.0", "1.0.0+build.1": "1.0.0_build.1", "+a+b": "_a_b"} {
		if got := TagFromVersion(v); got != tag {
			t.Errorf("TagFromVersion(%q) = %q, want %q", v, got, tag)
		}
		if got := VersionFromTag(tag); got != v {
			t.Errorf("VersionFromTag(%q) = %q, want %q", tag, got, v)
		}
	}
}

func TestListVersionsAndClosest(t *testing.T) {
	t.Parallel()
	var many []string
	for i := 0; i < 14; i++ {
		many = append(many, "1."+strconv.Itoa(i)+".0")
	}
	if got := ListVersions(many); got != "1.13.0, 1.12.0, 1.11.0, 1.10.0, 1.9.0, 1.8.0, 1.7.0, 1.6.0, 1.5.0, 1.4.0 (the newest 10 of 14)" {
		t.Fatal(got)
	}
	if got := ListVersions([]string{"1.0.0", "2.0.0-rc.1", "1.2.0"}); got != "2.0.0-rc.1, 1.2.0, 1.0.0" {
		t.Fatal(got)
	}
	names := []string{"acme/grep", "acme/sed", "acme/upper"}
	for in, want := range map[string]string{"acme/grpe": "acme/grep", "acme/uper": "acme/upper", "acme/zzzzzz": "", "acme/grep": ""} {
		if got := Closest(in, names); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDropV(t *testing.T) {
	t.Parallel()
	have := []string{"1.0.0", "1.2.0", "v2.0.0"}
	for in, want := range map[string]string{
		"v1.2.0": "1.2.0", "V1.2.0": "1.2.0", // the tag a Git user would type
		"1.2.0":  "", // nothing to drop
		"v1.3.0": "", // the rest is not there either
		"v":      "",
	} {
		if got := DropV(in, have); got != want {
			t.Errorf("DropV(%q) = %q, want %q", in, got, want)
		}
	}
}
