package pull_test

import (
	"errors"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
)

// A fresh payload is checked, and staged, as it arrives: over one stream or in pieces (which the
// ingest's hasher reads back in order), into a project's tools/ or into the CAS alone. The pull
// never reads it back from the blob afterwards.
func TestPullChecksThePayloadAsItArrives(t *testing.T) {
	// Not parallel: it counts the process's rereads and lent buffers.
	for _, c := range []struct {
		name            string
		pieces, casOnly bool
	}{{"stream", false, false}, {"stream-cas-only", false, true}, {"pieces", true, false}, {"pieces-cas-only", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			w, st, p := rangeWorld(t, 600_000, `"e"`)
			pl := w.Puller(st)
			if c.pieces {
				pl = parallelPuller(w, st, 4, 4)
			}
			pl.CASOnly = c.casOnly
			before, lent := pull.PayloadRereads(), bufpool.Lent()
			res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
			pulltest.BuffersBack(t, lent)
			if res.Digest != p.Digest().String() || !w.CAS.Has(p.Digest()) {
				t.Fatalf("result %+v", res)
			}
			if c.pieces && res.Connections < 2 {
				t.Fatalf("fetched over %d connection, want pieces", res.Connections)
			}
			if n := pull.PayloadRereads() - before; n != 0 {
				t.Errorf("the pull read %d payload back from its blob", n)
			}
			if !c.casOnly {
				if err := stage.CheckStaged(w.Proj.Tools(), grep, p.Digest()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A payload whose CRC-32 is not what its zip records is refused outside a project too: the
// streamed check does not vouch for it, and the check from the blob words the refusal.
func TestPullCASOnlyRefusesAPayloadThatLies(t *testing.T) {
	// Not parallel: it counts the process's rereads and lent buffers.
	wasm := artifacttest.Module(200_000, 31)
	spec := artifacttest.Spec{Name: "grep", Version: "1.0.0", Wasm: wasm}
	for _, stored := range []bool{false, true} {
		w := pulltest.NewWorld(t)
		st := pulltest.LayoutStore(t)
		p := pulltest.Packed{Zip: spec.Lying(stored, 0x1234, uint64(len(wasm))), Wasm: wasm, YAML: spec.Manifest()}
		pulltest.Push(t, st, grep, "1.0.0", "any", p)
		pl := w.Puller(st)
		pl.CASOnly = true
		before, lent := pull.PayloadRereads(), bufpool.Lent()
		_, err := w.Pull(pl, pulltest.Req(grep, "1.0.0"))
		pulltest.BuffersBack(t, lent)
		if !errors.Is(err, errs.InvalidArtifact) || w.CAS.Has(p.Digest()) {
			t.Fatalf("stored %v: pull = %v, blob kept %v; want invalid-artifact and nothing kept", stored, err, w.CAS.Has(p.Digest()))
		}
		if n := pull.PayloadRereads() - before; n != 1 {
			t.Errorf("stored %v: %d payloads read back, want the one the stream could not vouch for", stored, n)
		}
	}
}
