package lock

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

func TestUpsertRules(t *testing.T) {
	t.Parallel()
	base := func() *Lock {
		l := &Lock{}
		must(t, l.Upsert("acme/any", "1.0.0", "any", h(1), "", false))
		must(t, l.Upsert("acme/plat", "1.0.0", "linux-x86_64", h(2), "", false))
		return l
	}
	cases := []struct {
		name                string
		art, ver, plat, hex string
		update              bool
		wantErr             errs.Token // "" for success
		wantMsg             []string
		wantAny             string
		wantPlatforms       map[string]string
		wantVersion         string
	}{
		{name: "new entry", art: "acme/new", ver: "0.1.0", plat: "any", hex: h(9), wantAny: h(9), wantVersion: "0.1.0"},
		{name: "same any hash is a no-op", art: "acme/any", ver: "1.0.0", plat: "any", hex: h(1), wantAny: h(1), wantVersion: "1.0.0"},
		{name: "same platform hash is a no-op", art: "acme/plat", ver: "1.0.0", plat: "linux-x86_64", hex: h(2), wantPlatforms: map[string]string{"linux-x86_64": h(2)}, wantVersion: "1.0.0"},
		{name: "other any hash conflicts", art: "acme/any", ver: "1.0.0", plat: "any", hex: h(7), wantErr: errs.LockConflict,
			wantMsg: []string{"acme/any@1.0.0", h(1), h(7), "mur pull --update acme/any@1.0.0"}},
		{name: "other any hash with update replaces", art: "acme/any", ver: "1.0.0", plat: "any", hex: h(7), update: true, wantAny: h(7), wantVersion: "1.0.0"},
		{name: "other platform hash conflicts", art: "acme/plat", ver: "1.0.0", plat: "linux-x86_64", hex: h(7), wantErr: errs.LockConflict,
			wantMsg: []string{"acme/plat@1.0.0", "linux-x86_64", h(2), h(7), "--update"}},
		{name: "other platform hash with update replaces", art: "acme/plat", ver: "1.0.0", plat: "linux-x86_64", hex: h(7), update: true,
			wantPlatforms: map[string]string{"linux-x86_64": h(7)}, wantVersion: "1.0.0"},
		{name: "new platform merges", art: "acme/plat", ver: "1.0.0", plat: "darwin-aarch64", hex: h(8),
			wantPlatforms: map[string]string{"linux-x86_64": h(2), "darwin-aarch64": h(8)}, wantVersion: "1.0.0"},
		{name: "platform onto any conflicts", art: "acme/any", ver: "1.0.0", plat: "linux-x86_64", hex: h(8), wantErr: errs.LockConflict,
			wantMsg: []string{"platform-independent", "linux-x86_64", h(1), h(8), "mur pull --update acme/any@1.0.0"}},
		{name: "platform onto any with update", art: "acme/any", ver: "1.0.0", plat: "linux-x86_64", hex: h(8), update: true,
			wantPlatforms: map[string]string{"linux-x86_64": h(8)}, wantVersion: "1.0.0"},
		{name: "any onto platforms conflicts", art: "acme/plat", ver: "1.0.0", plat: "any", hex: h(8), wantErr: errs.LockConflict,
			wantMsg: []string{"per platform", "linux-x86_64", h(8), "--update"}},
		{name: "any onto platforms with update", art: "acme/plat", ver: "1.0.0", plat: "any", hex: h(8), update: true, wantAny: h(8), wantVersion: "1.0.0"},
		{name: "other version conflicts", art: "acme/any", ver: "1.1.0", plat: "any", hex: h(8), wantErr: errs.LockConflict,
			wantMsg: []string{"acme/any at version 1.0.0", "1.1.0", "mur pull --update acme/any@1.1.0"}},
		{name: "other version with update replaces everything", art: "acme/plat", ver: "2.0.0", plat: "darwin-x86_64", hex: h(8), update: true,
			wantPlatforms: map[string]string{"darwin-x86_64": h(8)}, wantVersion: "2.0.0"},
		{name: "bad name", art: "grep", ver: "1.0.0", plat: "any", hex: h(1), wantErr: errs.Usage, wantMsg: []string{"acme/grep"}},
		{name: "bad version", art: "acme/x", ver: "latest", plat: "any", hex: h(1), wantErr: errs.Usage, wantMsg: []string{"reserved"}},
		{name: "bad platform", art: "acme/x", ver: "1.0.0", plat: "plan9-mips", hex: h(1), wantErr: errs.Usage, wantMsg: []string{"plan9-mips"}},
		{name: "bad hex", art: "acme/x", ver: "1.0.0", plat: "any", hex: "sha256:" + h(1), wantErr: errs.Usage, wantMsg: []string{"64 lowercase hex"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := base()
			before := string(l.Marshal())
			err := l.Upsert(tc.art, tc.ver, tc.plat, tc.hex, "", tc.update)
			if tc.wantErr != "" {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %s", err, tc.wantErr)
				}
				for _, w := range tc.wantMsg {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message lacks %q: %v", w, err)
					}
				}
				if string(l.Marshal()) != before {
					t.Fatal("a refused Upsert changed the lock")
				}
				return
			}
			must(t, err)
			e := l.Find(tc.art)
			if e == nil {
				t.Fatal("entry missing")
			}
			if e.ResolvedVersion != tc.wantVersion || e.SHA256.Any != tc.wantAny || !reflect.DeepEqual(e.SHA256.Platforms, tc.wantPlatforms) {
				t.Fatalf("entry = %+v", *e)
			}
			if _, err := Parse(l.Marshal(), ""); err != nil {
				t.Fatalf("result does not parse: %v", err)
			}
		})
	}
}

func TestUpsertKeepsSortedAndOrigin(t *testing.T) {
	t.Parallel()
	l := &Lock{}
	for _, n := range []string{"b/x", "a/z", "c/y", "a/a"} {
		must(t, l.Upsert(n, "1", "any", h(len(n)), "ci", false))
	}
	var names []string
	for _, e := range l.Artifacts {
		names = append(names, e.Name)
		if e.Origin != "ci" {
			t.Errorf("origin %q", e.Origin)
		}
	}
	if strings.Join(names, ",") != "a/a,a/z,b/x,c/y" {
		t.Fatal(names)
	}
	if err := l.Upsert("a/q", "1", "any", h(1), "Bad Origin", false); !errors.Is(err, errs.Usage) {
		t.Fatal(err)
	}
	if l.Find("a/q") != nil || l.Find("nope/x") != nil {
		t.Fatal("Find found what is not there")
	}
}

func TestDigestPlatformChoice(t *testing.T) {
	t.Parallel()
	anyEntry := Entry{SHA256: Hashes{Any: h(1)}}
	platEntry := Entry{SHA256: Hashes{Platforms: map[string]string{"linux-x86_64": h(2), "darwin-aarch64": h(3)}}}
	cases := []struct {
		e        Entry
		platform string
		hex, pin string
		ok       bool
	}{
		{anyEntry, "linux-x86_64", h(1), "any", true},
		{anyEntry, "any", h(1), "any", true},
		{platEntry, "linux-x86_64", h(2), "linux-x86_64", true},
		{platEntry, "darwin-aarch64", h(3), "darwin-aarch64", true},
		{platEntry, "linux-aarch64", "", "", false}, // never another platform's hash
		{platEntry, "any", "", "", false},
	}
	for _, tc := range cases {
		hex, pin, ok := tc.e.Digest(tc.platform)
		if hex != tc.hex || pin != tc.pin || ok != tc.ok {
			t.Errorf("Digest(%q) on %+v = %q %q %v", tc.platform, tc.e.SHA256, hex, pin, ok)
		}
	}
}

func TestPins(t *testing.T) {
	t.Parallel()
	l := &Lock{}
	if _, ok := l.Pin("acme"); ok {
		t.Fatal("pin in empty lock")
	}
	good := ScopePin{Source: "github:acme/murmur-tools", OwnerID: 1, RepoID: 2}
	must(t, l.SetPin("acme", good))
	if p, ok := l.Pin("acme"); !ok || p != good {
		t.Fatal(p, ok)
	}
	must(t, l.SetPin("murmur", ScopePin{Source: "github:murmur-nexus/default-artifacts", OwnerID: 3, RepoID: 4}))
	refusals := []struct {
		scope string
		pin   ScopePin
		want  string
	}{
		{"local", ScopePin{Source: "github:acme/x", OwnerID: 1, RepoID: 1}, "local is reserved"},
		{"murmur", ScopePin{Source: "github:murmur/murmur-artifacts", OwnerID: 1, RepoID: 1}, "murmur is reserved"},
		{"acme", ScopePin{Source: "github:acme/x", OwnerID: 0, RepoID: 1}, "owner_id"},
		{"acme", ScopePin{Source: "github:acme/x", OwnerID: 1, RepoID: -1}, "repo_id"},
		{"acme", ScopePin{Source: "acme/x", OwnerID: 1, RepoID: 1}, "github:OWNER/REPO"},
		{"Acme", ScopePin{Source: "github:acme/x", OwnerID: 1, RepoID: 1}, "scope"},
	}
	for _, r := range refusals {
		err := l.SetPin(r.scope, r.pin)
		if !errors.Is(err, errs.InvalidLock) || !strings.Contains(err.Error(), r.want) {
			t.Errorf("SetPin(%q, %+v) = %v, want invalid-lock mentioning %q", r.scope, r.pin, err, r.want)
		}
	}
	if _, ok := l.Pin("local"); ok {
		t.Fatal("refused pin stored")
	}
	if !l.ForgetScope("acme") || l.ForgetScope("acme") {
		t.Fatal("ForgetScope")
	}
	if _, ok := l.Pin("acme"); ok {
		t.Fatal("forgotten pin remains")
	}
}

func TestDigests(t *testing.T) {
	t.Parallel()
	l := &Lock{}
	must(t, l.Upsert("a/one", "1", "any", h(5), "", false))
	must(t, l.Upsert("a/two", "1", "linux-x86_64", h(3), "", false))
	must(t, l.Upsert("a/two", "1", "darwin-aarch64", h(5), "", false)) // same blob as a/one
	must(t, l.Upsert("a/three", "1", "any", h(1), "", false))
	got := l.Digests()
	want := []string{"sha256:" + h(1), "sha256:" + h(3), "sha256:" + h(5)}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
		if err := got[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if len((&Lock{}).Digests()) != 0 {
		t.Fatal("digests of empty lock")
	}
}
