package lock

import (
	"bytes"
	"testing"
)

// A change to the clone leaves the original as it was, in every field a pull changes.
func TestCloneIsDeep(t *testing.T) {
	t.Parallel()
	l := &Lock{Scopes: map[string]ScopePin{}}
	if err := l.Upsert("acme/grep", "1.0.0", "linux-x86_64", hex64('a'), "", false); err != nil {
		t.Fatal(err)
	}
	if err := l.SetPin("acme", ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetProvenance("acme/grep", Provenance{Kind: ProvenanceKey, Bundle: "sha256:" + hex64('d'), Signer: "release key"}); err != nil {
		t.Fatal(err)
	}
	before := l.Marshal()
	c := l.Clone()
	if !bytes.Equal(c.Marshal(), before) {
		t.Fatal("the clone differs from the original")
	}
	if err := c.Upsert("acme/grep", "1.0.0", "darwin-aarch64", hex64('b'), "", false); err != nil {
		t.Fatal(err)
	}
	if err := c.Upsert("acme/cat", "2.0.0", "any", hex64('c'), "", false); err != nil {
		t.Fatal(err)
	}
	c.SetPin("acme", ScopePin{Source: "github:other/murmur-artifacts", OwnerID: 3, RepoID: 4})
	c.Find("acme/grep").Provenance.Signer = "someone else"
	if !bytes.Equal(l.Marshal(), before) {
		t.Fatalf("changing the clone changed the original:\n%s", l.Marshal())
	}
}

func hex64(c byte) string { return string(bytes.Repeat([]byte{c}, 64)) }
