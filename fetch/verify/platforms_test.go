package verify_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func TestAllPlatforms(t *testing.T) {
	t.Parallel()
	host := ref.HostPlatform()
	if host == ref.PlatformAny {
		t.Skip("this machine has no platform tag")
	}
	other := "darwin-aarch64"
	if host == other {
		other = "linux-x86_64"
	}
	w := newVerifyWorld(t)
	n, _ := ref.ParseName("acme/multi")
	pinned := map[string]digest.Digest{}
	for _, plat := range []string{host, other} {
		blob := pulltest.ZipOf("multi", "2.0.0", "built for "+plat)
		d, err := w.CAS.Ingest(w.ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
		if err != nil {
			t.Fatal(err)
		}
		pinned[plat] = d
	}
	err := lock.Update(w.ctx, w.Proj.LockPath(), func(l *lock.Lock) error {
		for plat, d := range pinned {
			if err := l.Upsert(n.String(), "2.0.0", plat, d.Encoded(), "", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stage.Stage(w.Proj.Tools(), w.CAS, n, pinned[host]); err != nil {
		t.Fatal(err)
	}

	in := w.input(t)
	if rep := w.run(t, in); rep.Blobs != 3 || rep.Tools != 3 || len(rep.Problems) != 0 {
		t.Fatalf("host platform: %d blobs %d tools, %+v", rep.Blobs, rep.Tools, rep.Problems)
	}
	in.Platform = "all"
	if rep := w.run(t, in); rep.Blobs != 4 || rep.Tools != 3 || len(rep.Problems) != 0 {
		t.Fatalf("all platforms: %d blobs %d tools, %+v", rep.Blobs, rep.Tools, rep.Problems)
	}

	// Another platform's pins are checked, but tools/ holds this machine's build: it is
	// checked against the host's pin, not reported as staged from the wrong blob.
	in.Platform = other
	if rep := w.run(t, in); rep.Blobs != 3 || rep.Tools != 3 || len(rep.Problems) != 0 {
		t.Fatalf("--platform %s: %d blobs %d tools, %+v", other, rep.Blobs, rep.Tools, rep.Problems)
	}

	// Damage the other platform's blob: only --platform all looks at it.
	path := w.CAS.Path(pinned[other])
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not the pinned bytes"), 0o444); err != nil {
		t.Fatal(err)
	}
	in.Platform = ""
	if rep := w.run(t, in); len(rep.Problems) != 0 {
		t.Fatalf("the host check looked at another platform's blob: %+v", rep.Problems)
	}
	in.Platform = "all"
	rep := w.run(t, in)
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Subject != "acme/multi "+pinned[other].String() {
		t.Fatalf("all platforms with a damaged %s blob: %+v", other, rep.Problems)
	}
	if w.CAS.Has(pinned[other]) {
		t.Error("the damaged blob was not quarantined")
	}
	// Naming the other platform checks its pin alone.
	in.Platform = other
	rep = w.run(t, in)
	if rep.Blobs != 3 || len(problems(rep, "blob")) != 1 {
		t.Fatalf("--platform %s: %d blobs, %+v", other, rep.Blobs, rep.Problems)
	}

	// --repair with a named platform fetches that platform's blob, and tools/ ends up holding
	// this machine's build again.
	otherBlob := pulltest.ZipOf("multi", "2.0.0", "built for "+other)
	desc := fstore.Descriptor{Name: n, Version: "2.0.0", Platform: other, Digest: pinned[other], Size: int64(len(otherBlob)), Title: "multi-2.0.0.mur.zip"}
	if err := w.layout.Push(w.ctx, desc, bytes.NewReader(otherBlob)); err != nil {
		t.Fatal(err)
	}
	rp := w.repairer()
	rp.Platform = other // as the verb hands the repairer down for --platform
	in.Repair = rp
	rep = w.run(t, in)
	if rep.Unrepaired() != 0 || len(problems(rep, "blob")) != 1 || !w.CAS.Has(pinned[other]) {
		t.Fatalf("--platform %s --repair: %+v", other, rep.Problems)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), n, pinned[host]); err != nil {
		t.Fatalf("tools/ after repairing another platform's blob: %v", err)
	}
	in.Repair, in.Platform = nil, "all"
	if rep := w.run(t, in); len(rep.Problems) != 0 {
		t.Fatalf("after repair: %+v", rep.Problems)
	}
}
