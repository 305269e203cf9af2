package pull_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
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
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	digests := map[string]digest.Digest{}
	var reqs []pull.Request
	for i := range 3 {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("bomb%d", i)}
		z := artifacttest.Spec{Name: name.Name, Version: "1.0.0", Wasm: artifacttest.Padded(name.Name, size), Compression: "zstd"}.Zip()
		if len(z) > size/100 {
			t.Fatalf("%s packs to %d bytes, not a bomb", name, len(z))
		}
		digests[name.String()] = pulltest.Push(t, st, name, "1.0.0", "any", pulltest.Packed{Zip: z}).Digest
		reqs = append(reqs, pulltest.Req(name, "1.0.0"))
	}
	p := w.Puller(st)
	p.Limits.MaxDecompressed = 5 << 20
	results, err := w.Pull(p, reqs...)
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
	l := w.ReadLock()
	for name, d := range digests {
		staged := filepath.Join(w.Proj.ToolsDir(), name)
		_, statErr := os.Stat(filepath.Join(staged, "capsule.wasm"))
		if name == refused[0] {
			if l.Find(name) != nil || w.CAS.Has(d) || !os.IsNotExist(statErr) {
				t.Errorf("the refused %s left a pin (%v), its blob (%v) or %s (%v)", name, l.Find(name) != nil, w.CAS.Has(d), staged, statErr)
			}
			continue
		}
		if l.Find(name) == nil || !w.CAS.Has(d) || statErr != nil {
			t.Errorf("%s is not pinned, in the CAS and staged: %v %v %v", name, l.Find(name) != nil, w.CAS.Has(d), statErr)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(w.Proj.ToolsDir(), "acme"))
	var left []string
	for _, e := range ents {
		if e.IsDir() {
			left = append(left, e.Name())
		}
	}
	if len(left) != 2 || strings.Contains(strings.Join(left, " "), ".mur-tmp") {
		t.Errorf("tools/acme holds %v; want the two staged folders alone", left)
	}

	p.Limits.MaxDecompressed = 6 << 20 // room for the third only if the two are not counted again
	if _, err := w.Pull(p, reqs...); err != nil {
		t.Fatalf("the pull with the bound raised: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Proj.ToolsDir(), refused[0], "capsule.wasm")); err != nil {
		t.Errorf("%s is not staged: %v", refused[0], err)
	}
}

// MURMUR_MAX_PULL_DECOMPRESSED_BYTES overrides config.yaml's bound, and one that is not a positive
// number fails the pull before anything is fetched.
func TestPullBoundFromTheEnvironment(t *testing.T) {
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	name := ref.Name{Scope: "acme", Name: "bomb"}
	pulltest.Push(t, st, name, "1.0.0", "any", pulltest.Packed{Zip: artifacttest.Spec{Name: "bomb", Version: "1.0.0", Wasm: artifacttest.Padded("bomb", 1<<20)}.Zip()})
	p := w.Puller(st)
	p.Limits.MaxDecompressed = 64 << 20
	before := w.State()
	t.Setenv(stage.EnvMaxPullDecompressed, "lots")
	_, err := w.Pull(p, pulltest.Req(name, "1.0.0"))
	errtest.WantToken(t, err, errs.InvalidConfig, stage.EnvMaxPullDecompressed, `"lots"`)
	w.AssertUnchanged(before)
	t.Setenv(stage.EnvMaxPullDecompressed, strconv.Itoa(512<<10))
	_, err = w.Pull(p, pulltest.Req(name, "1.0.0"))
	errtest.WantToken(t, err, errs.InvalidArtifact, "over the "+cas.FormatSize(512<<10)+" one pull may stage")
	w.AssertUnchanged(before)
}
