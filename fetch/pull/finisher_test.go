package pull

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash"
	"os"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/lock"
)

// fakeCompiled is a compiled cache that holds every key or none, and remembers the keys the pull
// hashed.
type fakeCompiled struct {
	holds      bool
	remembered map[digest.Digest][]byte
}

func (c *fakeCompiled) ModuleKey() hash.Hash                        { return sha256.New() }
func (c *fakeCompiled) HasCompiled([]byte) bool                     { return c.holds }
func (c *fakeCompiled) BlobKey(digest.Digest) ([]byte, bool)        { return nil, false }
func (c *fakeCompiled) RememberBlobKey(d digest.Digest, key []byte) { c.remembered[d] = key }

// A payload is finished alike whether it was downloaded (fresh) or the CAS held it (cached), and
// whether tools/ shows it or not: the blob is in the CAS and pinned, the pull is recorded, tools/
// holds the payload only when the pull stages, and only a fresh payload whose compiled form the
// cache lacks is queued for the compile.
func TestFinisherFreshOrCachedStagedOrNot(t *testing.T) {
	ctx := context.Background()
	zip := artifacttest.Spec{Name: "grep", Version: "1.0.0"}.Zip()
	d := digest.FromBytes(zip)
	for _, c := range []struct {
		name                  string
		fresh, stages, cached bool // cached: the compiled cache holds the payload's key
		wantCompile           bool
	}{
		{name: "fresh, staged", fresh: true, stages: true, wantCompile: true},
		{name: "fresh, staged, compiled already", fresh: true, stages: true, cached: true},
		{name: "fresh, not staged", fresh: true, wantCompile: true},
		{name: "from the CAS, staged", stages: true},
		{name: "from the CAS, not staged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := committerIn(t, sha("sed 1.0.0").Encoded())
			compiled := &fakeCompiled{holds: c.cached, remembered: map[digest.Digest][]byte{}}
			f := &finisher{cas: cm.cas, proj: cm.proj, stages: c.stages, now: time.Now, commit: cm, attest: &attestor{cas: cm.cas},
				compile: Compile{Precompile: func(context.Context, []byte) error { return nil }, Cache: compiled}}
			a, err := artifact.Read(bytes.NewReader(zip), int64(len(zip)))
			if err != nil {
				t.Fatal(err)
			}
			got := &fetched{desc: fstore.Descriptor{Name: grep, Version: "1.0.0", Platform: "any", Digest: d, Origin: "oci://a"}, archive: a}
			res := Result{Name: grep.String()}
			rereads := payloadRereads.Load()
			if c.fresh {
				if got.w, err = cm.cas.NewWriter(ctx); err != nil {
					t.Fatal(err)
				}
				defer got.w.Close()
				if _, err := got.w.Write(zip); err != nil {
					t.Fatal(err)
				}
				got.describe(&res)
				err = f.finish(ctx, Request{Name: grep, Version: "1.0.0"}, &res, got, time.Now())
			} else {
				if _, err := cm.cas.Ingest(ctx, bytes.NewReader(zip), int64(len(zip)), d); err != nil {
					t.Fatal(err)
				}
				err = f.cacheHit(ctx, Request{Name: grep, Version: "1.0.0"}, &res, got, time.Now())
			}
			if err != nil {
				t.Fatal(err)
			}

			if !cm.cas.Has(d) {
				t.Error("the blob is not in the CAS")
			}
			l, err := lock.Read(cm.proj.LockPath())
			if err != nil {
				t.Fatal(err)
			}
			if e := l.Find("acme/grep"); e == nil || e.ResolvedVersion != "1.0.0" {
				t.Errorf("murmur.lock pins grep as %+v", e)
			}
			recs, err := cm.cas.Records("")
			want := cas.OutcomePulled
			if !c.fresh {
				want = cas.OutcomeCacheHit
			}
			if err != nil || len(recs) != 1 || recs[0].Outcome != want || res.CacheHit == c.fresh {
				t.Errorf("records %+v (%v), cache hit %v; want one %s", recs, err, res.CacheHit, want)
			}
			if _, err := os.Stat(res.Tools); c.stages && err != nil || !c.stages && res.Tools != "" {
				t.Errorf("tools/ = %q (%v), staged %v", res.Tools, err, c.stages)
			}
			if (res.compile != "") != c.wantCompile {
				t.Errorf("compile queued %q, want queued %v", res.compile, c.wantCompile)
			}
			if c.fresh && compiled.remembered[d] == nil {
				t.Error("the key the pull hashed is not remembered")
			}
			if n := payloadRereads.Load() - rereads; c.fresh && n != 1 {
				t.Errorf("a fresh payload without a stream was read back %d times, want 1", n)
			}
		})
	}
}

// A payload tools/ shows already is not staged again, and the result still names its folder.
func TestFinisherNamesWhatToolsShowsAlready(t *testing.T) {
	ctx := context.Background()
	zip := artifacttest.Spec{Name: "grep", Version: "1.0.0"}.Zip()
	d := digest.FromBytes(zip)
	cm := committerIn(t, sha("sed 1.0.0").Encoded())
	f := &finisher{cas: cm.cas, proj: cm.proj, stages: true, now: time.Now, commit: cm, attest: &attestor{cas: cm.cas}}
	if _, err := cm.cas.Ingest(ctx, bytes.NewReader(zip), int64(len(zip)), d); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for range 2 {
		res := Result{Name: grep.String()}
		got := &fetched{desc: fstore.Descriptor{Name: grep, Version: "1.0.0", Platform: "any", Digest: d, Origin: "oci://a"}}
		if err := f.cacheHit(ctx, Request{Name: grep, Version: "1.0.0"}, &res, got, time.Now()); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, res.Tools)
	}
	if dirs[0] == "" || dirs[1] != dirs[0] {
		t.Errorf("tools/ folders %q, want the same one twice", dirs)
	}
}
