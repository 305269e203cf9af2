package lock

import (
	"errors"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

const provenanceLock = `lock_version: 3
scopes: {}
artifacts:
  - name: acme/grep
    resolved_version: 1.2.0
    sha256:
      any: 3f00000000000000000000000000000000000000000000000000000000000e1
    origin: operator
    provenance:
      kind: github-attestation
      bundle: sha256:9c00000000000000000000000000000000000000000000000000000000000004
      signer: "https://github.com/acme/murmur-tools/.github/workflows/release.yml@refs/tags/v1.2.0"
`

func TestProvenanceRoundTrips(t *testing.T) {
	t.Parallel()
	src := strings.Replace(provenanceLock, "3f00000000000000000000000000000000000000000000000000000000000e1", "3f000000000000000000000000000000000000000000000000000000000000e1", 1)
	l, err := Parse([]byte(src), "murmur.lock")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Find("acme/grep").Provenance
	if p == nil || p.Kind != ProvenanceGitHub || p.Signer != "https://github.com/acme/murmur-tools/.github/workflows/release.yml@refs/tags/v1.2.0" {
		t.Fatalf("provenance = %+v", p)
	}
	if got := string(l.Marshal()); got != src {
		t.Fatalf("marshal:\n%s\nwant\n%s", got, src)
	}
	// The bundle is kept with the payload (GC roots, cache export).
	if ds := l.Digests(); len(ds) != 2 || ds[1] != "sha256:9c00000000000000000000000000000000000000000000000000000000000004" {
		t.Fatalf("Digests = %v", ds)
	}
	// A same-hash upsert keeps it; a bad one is refused with the line.
	if err := l.Upsert("acme/grep", "1.2.0", "any", "3f000000000000000000000000000000000000000000000000000000000000e1", "", false); err != nil || l.Find("acme/grep").Provenance == nil {
		t.Fatalf("upsert dropped provenance: %v", err)
	}
	for _, bad := range []string{"kind: github-attestation\n", "kind: sbom\n"} {
		text := strings.Replace(src, "kind: github-attestation\n", strings.Replace(bad, "kind: github-attestation\n", "", 1), 1)
		if _, err := Parse([]byte(text), "murmur.lock"); !errors.Is(err, errs.InvalidLock) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if err := l.SetProvenance("acme/grep", Provenance{Kind: ProvenanceKey, Bundle: "sha256:zz", Signer: "k"}); err == nil {
		t.Fatal("SetProvenance took a bad bundle digest")
	}
}
