package fetch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	fpull "github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// What the payloads of one pull stage into tools/ is bounded together: three artifacts of a few
// KiB that each decompress to 2 MiB, under a bound of 5 MiB, stage two of them. The third is
// refused (invalid-artifact) naming the bound and both ways to raise it, and leaves no pin, no
// blob and no tools/ folder, not even a temporary one; the two staged are whole. A pull with the
// bound raised stages the third, and does not count the two staged already.
func TestPullStagesWithinItsBound(t *testing.T) {
	const size = 2 << 20
	w := newWorld(t)
	st := layoutStore(t)
	digests := map[string]digest.Digest{}
	var reqs []fpull.Request
	for i := range 3 {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("bomb%d", i)}
		z := artifacttest.Spec{Name: name.Name, Version: "1.0.0", Wasm: artifacttest.Padded(name.Name, size), Compression: "zstd"}.Zip()
		if len(z) > size/100 {
			t.Fatalf("%s packs to %d bytes, not a bomb", name, len(z))
		}
		push(t, st, name, "1.0.0", "any", packed{zip: z})
		digests[name.String()] = digest.FromBytes(z)
		reqs = append(reqs, req(name, "1.0.0"))
	}
	p := w.puller(st)
	p.Limits.MaxDecompressed = 5 << 20
	results, err := w.pull(p, reqs...)
	errtest.WantToken(t, err, errs.InvalidArtifact, "over the "+cas.FormatSize(5<<20)+" one pull may stage", "pull.max_decompressed", stage.EnvMaxPullDecompressed)
	var refused []string
	for _, r := range results {
		if r.Err != nil {
			refused = append(refused, r.Name)
		}
	}
	if len(refused) != 1 {
		t.Fatalf("refused %v; want exactly one of the three (two fit in 5 MiB)", refused)
	}
	l := w.readLock()
	for name, d := range digests {
		staged := filepath.Join(w.proj.ToolsDir(), "acme", strings.TrimPrefix(name, "acme/"))
		_, statErr := os.Stat(filepath.Join(staged, "capsule.wasm"))
		if name == refused[0] {
			if l.Find(name) != nil || w.cas.Has(d) || !os.IsNotExist(statErr) {
				t.Errorf("the refused %s left a pin (%v), its blob (%v) or %s (%v)", name, l.Find(name) != nil, w.cas.Has(d), staged, statErr)
			}
			continue
		}
		if l.Find(name) == nil || !w.cas.Has(d) || statErr != nil {
			t.Errorf("%s is not pinned, in the CAS and staged: %v %v %v", name, l.Find(name) != nil, w.cas.Has(d), statErr)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(w.proj.ToolsDir(), "acme"))
	var left []string
	for _, e := range ents {
		if e.IsDir() {
			left = append(left, e.Name())
		}
	}
	sort.Strings(left)
	if len(left) != 2 {
		t.Errorf("tools/acme holds %v; want the two staged folders alone", left)
	}

	p.Limits.MaxDecompressed = 6 << 20 // room for the third only if the two are not counted again
	if _, err := w.pull(p, reqs...); err != nil {
		t.Fatalf("the pull with the bound raised: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.proj.ToolsDir(), refused[0], "capsule.wasm")); err != nil {
		t.Errorf("%s is not staged: %v", refused[0], err)
	}
}

// MURMUR_MAX_PULL_DECOMPRESSED_BYTES overrides config.yaml's bound, and one that is not a positive
// number fails the pull before anything is fetched.
func TestPullBoundFromTheEnvironment(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	name := ref.Name{Scope: "acme", Name: "bomb"}
	push(t, st, name, "1.0.0", "any", packed{zip: artifacttest.Spec{Name: "bomb", Version: "1.0.0", Wasm: artifacttest.Padded("bomb", 1<<20)}.Zip()})
	p := w.puller(st)
	p.Limits.MaxDecompressed = 64 << 20
	before := w.state()
	t.Setenv(stage.EnvMaxPullDecompressed, "lots")
	_, err := w.pull(p, req(name, "1.0.0"))
	errtest.WantToken(t, err, errs.InvalidConfig, stage.EnvMaxPullDecompressed, `"lots"`)
	w.assertUnchanged(before)
	t.Setenv(stage.EnvMaxPullDecompressed, strconv.Itoa(512<<10))
	_, err = w.pull(p, req(name, "1.0.0"))
	errtest.WantToken(t, err, errs.InvalidArtifact, "over the "+cas.FormatSize(512<<10)+" one pull may stage")
	w.assertUnchanged(before)
}
