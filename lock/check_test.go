package lock

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Check against sample(): acme/grep 1.2.0 for any platform, acme/cc 2.0.0 for linux-x86_64 and
// darwin-aarch64. Each case names the exact mismatches reported, in name order.
func TestCheck(t *testing.T) {
	t.Parallel()
	both := []Want{{"acme/cc", "2.0.0"}, {"acme/grep", "1.2.0"}}
	for _, c := range []struct {
		name     string
		wants    []Want
		platform string
		want     []Mismatch
		lines    []string // the Mismatch lines a person reads
	}{
		{"every pin as wanted", both, "linux-x86_64", nil, nil},
		{"latest allows the version pinned", []Want{{"acme/cc", ref.Latest}, {"acme/grep", ref.Latest}}, "linux-x86_64", nil, nil},
		{"all asks that some platform is pinned", both, "all", nil, nil},
		{"a pin at another version than wanted", []Want{{"acme/cc", "2.0.0"}, {"acme/grep", "1.3.0"}}, "linux-x86_64",
			[]Mismatch{{Kind: WrongVersion, Name: "acme/grep", Requested: "1.3.0", Locked: "1.2.0"}},
			[]string{"acme/grep: murmur.yaml asks for 1.3.0, but murmur.lock pins 1.2.0"}},
		{"a pin the manifest does not declare", []Want{{"acme/grep", "1.2.0"}}, "linux-x86_64",
			[]Mismatch{{Kind: Undeclared, Name: "acme/cc", Locked: "2.0.0"}},
			[]string{"acme/cc: murmur.lock pins 2.0.0, but murmur.yaml no longer declares it"}},
		{"another version and an undeclared pin, in name order", []Want{{"acme/grep", "1.3.0"}}, "linux-x86_64",
			[]Mismatch{{Kind: Undeclared, Name: "acme/cc", Locked: "2.0.0"}, {Kind: WrongVersion, Name: "acme/grep", Requested: "1.3.0", Locked: "1.2.0"}},
			[]string{"acme/cc: murmur.lock pins 2.0.0, but murmur.yaml no longer declares it", "acme/grep: murmur.yaml asks for 1.3.0, but murmur.lock pins 1.2.0"}},
		{"a declared artifact not pinned", append([]Want{{"acme/ls", "1.0.0"}}, both...), "linux-x86_64",
			[]Mismatch{{Kind: NotPinned, Name: "acme/ls", Requested: "1.0.0", Platform: "linux-x86_64"}},
			[]string{"acme/ls: murmur.yaml declares it (1.0.0), but murmur.lock does not pin it for linux-x86_64"}},
		{"pinned only for other platforms", both, "linux-aarch64",
			[]Mismatch{{Kind: NotPinned, Name: "acme/cc", Requested: "2.0.0", Locked: "2.0.0", Platform: "linux-aarch64"}},
			[]string{"acme/cc: murmur.yaml declares it (2.0.0), but murmur.lock pins 2.0.0 only for other platforms than linux-aarch64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := sample().Check(c.wants, c.platform)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Check = %#v\nwant    %#v", got, c.want)
			}
			for i, m := range got {
				if m.String() != c.lines[i] {
					t.Errorf("mismatch %d reads %q, want %q", i, m.String(), c.lines[i])
				}
			}
			err := MismatchError(got)
			if len(got) == 0 {
				if err != nil {
					t.Fatalf("MismatchError of none = %v", err)
				}
				return
			}
			if !errors.Is(err, errs.LockMismatch) {
				t.Fatalf("MismatchError = %v, want lock-mismatch", err)
			}
		})
	}
}

// The lock-mismatch error lists every difference on its own line, then the fix.
func TestMismatchError(t *testing.T) {
	t.Parallel()
	err := MismatchError(sample().Check([]Want{{"acme/grep", "1.3.0"}}, "linux-x86_64"))
	want := "murmur.lock does not follow murmur.yaml (2 differences):\n" +
		"  acme/cc: murmur.lock pins 2.0.0, but murmur.yaml no longer declares it\n" +
		"  acme/grep: murmur.yaml asks for 1.3.0, but murmur.lock pins 1.2.0\n" +
		"run 'mur lock' to pin what murmur.yaml declares, then commit murmur.lock"
	if errs.TokenOf(err) != errs.LockMismatch || errs.Message(err) != want {
		t.Fatalf("MismatchError = %q (%s)\nwant %q", errs.Message(err), errs.TokenOf(err), want)
	}
}

func TestCheckOwner(t *testing.T) {
	t.Parallel()
	pin := ScopePin{Source: "github:acme/murmur-tools", OwnerID: 1234567, RepoID: 7654321}
	must(t, pin.CheckOwner("acme", "github:acme/murmur-tools", 1234567))
	must(t, pin.CheckOwner("acme", "github:Acme/murmur-tools", 0))
	err := pin.CheckOwner("acme", "github:acme/murmur-tools", 42)
	if !errors.Is(err, errs.OwnerChanged) {
		t.Fatalf("got %v", err)
	}
	for _, w := range []string{"acme", "1234567", "42", "mur lock forget-scope acme"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q: %v", w, err)
		}
	}
	// A scope the configuration moved to another repository is refused before any request.
	err = pin.CheckOwner("acme", "github:newowner/murmur-tools", 0)
	if !errors.Is(err, errs.OwnerChanged) {
		t.Fatalf("moved source: got %v", err)
	}
	for _, w := range []string{"github:acme/murmur-tools", "github:newowner/murmur-tools", "1234567", "mur lock forget-scope acme"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("moved-source message lacks %q: %v", w, err)
		}
	}
}

// The scope reservations, in their one home: local has no source, murmur only its own.
func TestCheckScopeSource(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scope, source string
		want          string // "" when allowed
	}{
		{"local", "", "scope local is reserved"},
		{"local", "github:acme/x", "scope local is reserved"},
		{"murmur", "", ""},
		{"murmur", MurmurSource, ""},
		{"murmur", "github:Murmur-Nexus/default-artifacts", ""},
		{"murmur", "github:evil/default-artifacts", "github:evil/default-artifacts"},
		{"acme", "github:acme/tools", ""},
		{"acme", "", ""},
	}
	for _, c := range cases {
		err := CheckScopeSource(c.scope, c.source)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s %s: %v", c.scope, c.source, err)
			}
			continue
		}
		if errs.TokenOf(err) != errs.Usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want usage error naming %q", c.scope, c.source, err, c.want)
		}
	}
}

// A pin prints the same in pull's new_pin and forget-scope's pin: snake_case keys.
func TestScopePinJSON(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(ScopePin{Source: "github:acme/tools", OwnerID: 1, RepoID: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"source":"github:acme/tools","owner_id":1,"repo_id":2}`; string(raw) != want {
		t.Fatalf("%s, want %s", raw, want)
	}
}
