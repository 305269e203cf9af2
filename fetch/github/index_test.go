package github

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

const hexA = "3f0000000000000000000000000000000000000000000000000000000000e1a1"
const hexB = "3f0000000000000000000000000000000000000000000000000000000000e1b2"

func entry(name, version, platform, sha string) IndexEntry {
	return IndexEntry{Name: name, Version: version, Platform: platform, Release: "v" + version, Asset: "x-" + version + ".mur.zip", Size: 10, SHA256: sha}
}

func TestParseIndexAcceptsSpecExample(t *testing.T) {
	data := []byte(`{ "index_version": 1, "scope": "acme",
  "artifacts": [ { "name": "acme/grep", "version": "1.2.0", "platform": "any",
                   "release": "v1.2.0", "asset": "grep-1.2.0.mur.zip",
                   "size": 123456, "sha256": "` + hexA + `" } ] }`)
	ix, err := ParseIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	want := IndexEntry{Name: "acme/grep", Version: "1.2.0", Platform: "any", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Size: 123456, SHA256: hexA}
	if ix.Scope != "acme" || len(ix.Artifacts) != 1 || ix.Artifacts[0] != want {
		t.Fatalf("got %+v", ix)
	}
}

func TestParseIndexRefusals(t *testing.T) {
	good := `{"name":"acme/grep","version":"1.2.0","platform":"any","release":"v1","asset":"g.mur.zip","size":5,"sha256":"` + hexA + `"}`
	withEntry := func(e string) string {
		return `{"index_version":1,"scope":"acme","artifacts":[` + e + `]}`
	}
	tests := []struct {
		name, data, want string
	}{
		{"not json", `<html>`, "not valid JSON"},
		{"trailing data", withEntry(good) + `{}`, "after its JSON"},
		{"no version", `{"scope":"acme","artifacts":[]}`, "no index_version"},
		{"version 2", `{"index_version":2,"scope":"acme","artifacts":[]}`, "index_version 2"},
		{"no scope", `{"index_version":1,"artifacts":[]}`, "no scope"},
		{"bad scope", `{"index_version":1,"scope":"Acme","artifacts":[]}`, "not a valid scope"},
		{"no artifacts", `{"index_version":1,"scope":"acme"}`, "no artifacts"},
		{"bare name", withEntry(strings.Replace(good, "acme/grep", "grep", 1)), "no scope"},
		{"other scope", withEntry(strings.Replace(good, "acme/grep", "evil/grep", 1)), `belongs to scope "evil"`},
		{"reserved version", withEntry(strings.Replace(good, `"1.2.0"`, `"latest"`, 1)), "reserved"},
		{"bad platform", withEntry(strings.Replace(good, `"any"`, `"windows"`, 1)), "platform"},
		{"no release", withEntry(strings.Replace(good, `"v1"`, `""`, 1)), "release is empty"},
		{"asset path", withEntry(strings.Replace(good, `"g.mur.zip"`, `"../g.mur.zip"`, 1)), "not a file name"},
		{"string size", withEntry(strings.Replace(good, `"size":5`, `"size":"5"`, 1)), "artifacts.size holds a JSON string"},
		{"zero size", withEntry(strings.Replace(good, `"size":5`, `"size":0`, 1)), "not positive"},
		{"short sha", withEntry(strings.Replace(good, hexA, "abc", 1)), "64 lowercase hex"},
		{"upper sha", withEntry(strings.Replace(good, hexA, strings.ToUpper(hexA), 1)), "64 lowercase hex"},
		{"duplicate", withEntry(good + "," + strings.Replace(good, hexA, hexB, 1)), "twice"},
		{"published date only", withEntry(strings.Replace(good, `"size"`, `"published":"2026-01-02","size"`, 1)), "not an RFC 3339 time"},
		{"published words", withEntry(strings.Replace(good, `"size"`, `"published":"yesterday","size"`, 1)), `published "yesterday"`},
		{"published number", withEntry(strings.Replace(good, `"size"`, `"published":1767225600,"size"`, 1)), "artifacts.published holds a JSON number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseIndex([]byte(tt.data))
			if !errors.Is(err, errs.IndexMismatch) {
				t.Fatalf("err = %v, want index-mismatch", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	if _, err := ParseIndex([]byte(withEntry(good))); err != nil {
		t.Fatalf("the good entry itself is refused: %v", err)
	}
	// A published time, in UTC or with an offset, is read and written back as it was.
	for _, p := range []string{"2026-01-02T15:04:05Z", "2026-01-02T16:04:05+01:00"} {
		ix, err := ParseIndex([]byte(withEntry(strings.Replace(good, `"size"`, `"published":"`+p+`","size"`, 1))))
		if err != nil || ix.Artifacts[0].Published != p {
			t.Fatalf("published %s: %v %+v", p, err, ix)
		}
		if !strings.Contains(string(ix.Marshal()), `"published": "`+p+`"`) {
			t.Fatalf("published %s is not written back:\n%s", p, ix.Marshal())
		}
	}
}

func TestMarshalIsSortedAndRoundTrips(t *testing.T) {
	a := &Index{Scope: "acme", Artifacts: []IndexEntry{
		entry("acme/zed", "1.0.0", "any", hexA),
		entry("acme/grep", "1.2.0", "linux-x86_64", hexA),
		entry("acme/grep", "1.2.0", "any", hexB),
		entry("acme/grep", "1.10.0", "any", hexB),
	}}
	b := &Index{Scope: "acme", Artifacts: []IndexEntry{a.Artifacts[3], a.Artifacts[1], a.Artifacts[0], a.Artifacts[2]}}
	if !bytes.Equal(a.Marshal(), b.Marshal()) {
		t.Fatalf("same entries in another order marshal differently:\n%s\n%s", a.Marshal(), b.Marshal())
	}
	out := a.Marshal()
	if !bytes.HasSuffix(out, []byte("}\n")) || !bytes.HasPrefix(out, []byte("{\n  \"index_version\": 1,\n  \"scope\": \"acme\",")) {
		t.Fatalf("unexpected layout:\n%s", out)
	}
	back, err := ParseIndex(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Marshal(), out) {
		t.Fatal("marshal of a parsed index differs")
	}
	if back.Artifacts[0].Name != "acme/grep" || back.Artifacts[len(back.Artifacts)-1].Name != "acme/zed" {
		t.Fatalf("not sorted: %+v", back.Artifacts)
	}
	empty := (&Index{Scope: "acme"}).Marshal()
	if !bytes.Contains(empty, []byte(`"artifacts": []`)) {
		t.Fatalf("empty index marshals as %s", empty)
	}
	if _, err := ParseIndex(empty); err != nil {
		t.Fatalf("empty index does not parse back: %v", err)
	}
}

func TestLookup(t *testing.T) {
	ix := &Index{Scope: "acme", Artifacts: []IndexEntry{
		entry("acme/grep", "1.9.0", "any", hexA),
		entry("acme/grep", "1.10.0", "any", hexA),
		entry("acme/grep", "1.10.0", "linux-x86_64", hexB),
		entry("acme/grep", "2.0.0-rc.1", "any", hexA),
		entry("acme/grep", "3.0.0", "darwin-aarch64", hexA),
		entry("acme/odd", "nightly", "any", hexA),
		entry("acme/sed", "1.0.0", "linux-x86_64", hexA),
	}}
	tests := []struct {
		name, version, platform string
		wantVersion, wantPlat   string
		ok                      bool
	}{
		{"acme/grep", "1.10.0", "linux-x86_64", "1.10.0", "linux-x86_64", true},
		{"acme/grep", "1.10.0", "darwin-x86_64", "1.10.0", "any", true},
		{"acme/grep", "1.10.0", "any", "1.10.0", "any", true},
		{"acme/grep", "1.9.0", "linux-x86_64", "1.9.0", "any", true},
		{"acme/grep", "latest", "linux-x86_64", "1.10.0", "linux-x86_64", true}, // the newest release: 2.0.0-rc.1 is a pre-release
		{"acme/grep", "LATEST", "darwin-aarch64", "3.0.0", "darwin-aarch64", true},
		{"acme/grep", "1.0.0", "any", "", "", false},
		{"acme/sed", "1.0.0", "darwin-aarch64", "", "", false},
		{"acme/sed", "latest", "darwin-aarch64", "", "", false},
		{"acme/odd", "latest", "any", "", "", false},
		{"acme/odd", "nightly", "any", "nightly", "any", true},
		{"acme/none", "1.0.0", "any", "", "", false},
	}
	for _, tt := range tests {
		e, ok := ix.Lookup(tt.name, tt.version, tt.platform)
		if ok != tt.ok || e.Version != tt.wantVersion || e.Platform != tt.wantPlat {
			t.Errorf("Lookup(%s, %s, %s) = %s %s %v; want %s %s %v", tt.name, tt.version, tt.platform, e.Version, e.Platform, ok, tt.wantVersion, tt.wantPlat, tt.ok)
		}
	}
}

func TestMerge(t *testing.T) {
	ix := &Index{Scope: "acme", Artifacts: []IndexEntry{entry("acme/grep", "1.0.0", "any", hexA)}}
	renamed := entry("acme/grep", "1.0.0", "any", hexA)
	renamed.Release = "v1.0.0-again"
	if err := ix.Merge(&Index{Scope: "acme", Artifacts: []IndexEntry{renamed, entry("acme/grep", "1.1.0", "any", hexB)}}); err != nil {
		t.Fatal(err)
	}
	if len(ix.Artifacts) != 2 || ix.Artifacts[0].Release != "v1.0.0-again" {
		t.Fatalf("after merge: %+v", ix.Artifacts)
	}
	err := ix.Merge(&Index{Scope: "acme", Artifacts: []IndexEntry{entry("acme/grep", "1.1.0", "any", hexA)}})
	if !errors.Is(err, errs.IndexMismatch) || !strings.Contains(err.Error(), hexA) || !strings.Contains(err.Error(), hexB) {
		t.Fatalf("conflicting merge: %v", err)
	}
	if len(ix.Artifacts) != 2 || ix.Artifacts[1].SHA256 != hexB {
		t.Fatalf("a refused merge changed the index: %+v", ix.Artifacts)
	}
	if err := ix.Merge(&Index{Scope: "other"}); !errors.Is(err, errs.IndexMismatch) {
		t.Fatalf("merge across scopes: %v", err)
	}
}

// A version is published once: re-indexing it keeps the time it first had, and an entry from
// an index that predates the field takes the time of the first index that has one.
func TestMergeKeepsPublished(t *testing.T) {
	first, second := "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"
	old := entry("acme/grep", "1.0.0", "any", hexA)
	old.Published = first
	legacy := entry("acme/grep", "0.9.0", "any", hexB)
	ix := &Index{Scope: "acme", Artifacts: []IndexEntry{old, legacy}}
	again, legacyAgain, fresh := old, legacy, entry("acme/grep", "1.1.0", "any", hexB)
	again.Published, legacyAgain.Published, fresh.Published = second, second, second
	again.Release = "v1.0.0-again"
	if err := ix.Merge(&Index{Scope: "acme", Artifacts: []IndexEntry{again, legacyAgain, fresh}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]IndexEntry{}
	for _, e := range ix.Artifacts {
		got[e.Version] = e
	}
	if e := got["1.0.0"]; e.Published != first || e.Release != "v1.0.0-again" {
		t.Errorf("re-indexed 1.0.0: %+v, want published %s kept and the new release", e, first)
	}
	if got["0.9.0"].Published != second || got["1.1.0"].Published != second {
		t.Errorf("0.9.0 %q, 1.1.0 %q: want %s", got["0.9.0"].Published, got["1.1.0"].Published, second)
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add([]byte(`{"index_version":1,"scope":"acme","artifacts":[{"name":"acme/grep","version":"1.2.0","platform":"any","release":"v1","asset":"g.mur.zip","size":5,"sha256":"` + hexA + `"}]}`))
	f.Add([]byte(`{"index_version":1,"scope":"acme","artifacts":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParseIndex(data)
		if err != nil {
			if !errors.Is(err, errs.IndexMismatch) {
				t.Fatalf("refusal without index-mismatch: %v", err)
			}
			return
		}
		out := ix.Marshal()
		back, err := ParseIndex(out)
		if err != nil {
			t.Fatalf("marshal of an accepted index is refused: %v\n%s", err, out)
		}
		if !bytes.Equal(back.Marshal(), out) {
			t.Fatal("marshal is not stable")
		}
	})
}
