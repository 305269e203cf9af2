package cas

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"
)

// The provenance index names, per blob, the bundles its records verified, without the records'
// whole history being read; a planted link at the index is no index.
func TestProvenanceIndex(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	blob, bundle := digest.FromString("blob"), digest.FromString("bundle")
	if got := s.ProvenanceOf(blob); len(got) != 0 {
		t.Fatalf("before any record: %v", got)
	}
	rec := Record{Ref: "acme/grep@1.0.0", Digest: blob, Provenance: &Provenance{Kind: "key", Bundle: bundle, Signer: "a768"}}
	for i := 0; i < 2; i++ { // the same bundle twice is named once
		if err := s.AppendRecords([]Record{rec, {Ref: "acme/sed@1.0.0", Digest: digest.FromString("other")}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.ProvenanceOf(blob); !slices.Equal(got, []digest.Digest{bundle}) {
		t.Fatalf("ProvenanceOf = %v, want [%s]", got, bundle)
	}
	if got := s.ProvenanceOf(digest.FromString("other")); len(got) != 0 {
		t.Fatalf("a record without provenance is indexed: %v", got)
	}
	// A link planted at the index is not followed.
	target := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(target, []byte(digest.FromString("planted").String()+"\n"), 0o644)
	p := s.provenanceIndex(blob)
	os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if got := s.ProvenanceOf(blob); len(got) != 0 {
		t.Fatalf("the index followed a planted link: %v", got)
	}
}
