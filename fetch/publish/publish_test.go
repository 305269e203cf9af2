package publish_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func TestPublishFile(t *testing.T) {
	file := artifacttest.File(t, t.TempDir(), "grep", "1.2.0", artifacttest.Tagged("x"))
	it, err := publish.FromFile(file, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	sum, size := artifacttest.FileSum(t, file)
	if it.File != file || it.Desc.Name != (ref.Name{Scope: "acme", Name: "grep"}) || it.Desc.Version != "1.2.0" || it.Desc.Platform != "any" ||
		it.Desc.Digest.Encoded() != sum || it.Desc.Size != size || it.Desc.Title != "grep-1.2.0.mur.zip" {
		t.Fatalf("item %+v", it)
	}

	_, err = publish.FromFile(file, "local", "any")
	errtest.WantToken(t, err, errs.Usage, "local")
	_, err = publish.FromFile(file, "", "any")
	errtest.WantToken(t, err, errs.Usage, "--scope")
	_, err = publish.FromFile(filepath.Join(t.TempDir(), "gone.mur.zip"), "acme", "any")
	errtest.WantToken(t, err, errs.NotFound, "gone.mur.zip")

	// Push sends the file's bytes, and the store serves the same digest back.
	st, err := ocistore.Open("oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := publish.Push(context.Background(), st, it); err != nil {
		t.Fatal(err)
	}
	d, err := st.Resolve(context.Background(), it.Desc.Name, "1.2.0", "any")
	if err != nil || d.Digest != it.Desc.Digest || d.Size != size {
		t.Fatalf("Resolve after Push: %+v, %v", d, err)
	}
}

// casWithLock ingests file into a fresh CAS and pins it in a lock for platform.
func casWithLock(t *testing.T, file, name, version, platform string) (*cas.Store, *lock.Lock, digest.Digest) {
	t.Helper()
	s, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := s.Ingest(context.Background(), f, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	l := &lock.Lock{Scopes: map[string]lock.ScopePin{}}
	if err := l.Upsert(name, version, platform, d.Encoded(), "", false); err != nil {
		t.Fatal(err)
	}
	return s, l, d
}

func TestPublishFromCAS(t *testing.T) {
	file := artifacttest.File(t, t.TempDir(), "grep", "1.2.0", artifacttest.Tagged("y"))
	s, l, d := casWithLock(t, file, "acme/grep", "1.2.0", "any")
	grep := ref.Name{Scope: "acme", Name: "grep"}
	for _, version := range []string{"1.2.0", ref.Latest} {
		it, err := publish.FromCAS(s, l, ref.Ref{Name: grep, Version: version}, "any")
		if err != nil {
			t.Fatalf("FromCAS %s: %v", version, err)
		}
		_, size := artifacttest.FileSum(t, file)
		if it.File != "" || it.Desc.Name != grep || it.Desc.Version != "1.2.0" || it.Desc.Platform != "any" ||
			it.Desc.Digest != d || it.Desc.Size != size || it.Desc.Title != "grep-1.2.0.mur.zip" {
			t.Fatalf("item %+v", it)
		}
	}

	_, err := publish.FromCAS(s, l, ref.Ref{Name: grep, Version: "1.3.0"}, "any")
	errtest.WantToken(t, err, errs.NotFound, "1.2.0", "1.3.0")
	_, err = publish.FromCAS(s, l, ref.Ref{Name: ref.Name{Scope: "acme", Name: "find"}, Version: "1.0.0"}, "any")
	errtest.WantToken(t, err, errs.NotFound, "acme/find", "mur pull")

	// Scope local came from a file on disk: it is never published, even from the CAS.
	ls, ll, _ := casWithLock(t, file, "local/grep", "1.2.0", "any")
	_, err = publish.FromCAS(ls, ll, ref.Ref{Name: ref.Name{Scope: "local", Name: "grep"}, Version: "1.2.0"}, "any")
	errtest.WantToken(t, err, errs.Usage, "local/grep", "--scope")

	// A damaged blob is refused, not mirrored.
	os.Chmod(s.Path(d), 0o644)
	os.WriteFile(s.Path(d), []byte("damaged"), 0o644)
	_, err = publish.FromCAS(s, l, ref.Ref{Name: grep, Version: "1.2.0"}, "any")
	errtest.WantToken(t, err, errs.Integrity, d.String())
	// It went to quarantine; asking again finds it missing.
	_, err = publish.FromCAS(s, l, ref.Ref{Name: grep, Version: "1.2.0"}, "any")
	errtest.WantToken(t, err, errs.NotFound)
}

func TestPublishFromCASPlatforms(t *testing.T) {
	file := artifacttest.File(t, t.TempDir(), "grep", "1.2.0", artifacttest.Tagged("z"))
	s, l, d := casWithLock(t, file, "acme/grep", "1.2.0", "linux-x86_64")
	grep := ref.Ref{Name: ref.Name{Scope: "acme", Name: "grep"}, Version: "1.2.0"}
	it, err := publish.FromCAS(s, l, grep, "linux-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if it.Desc.Platform != "linux-x86_64" || it.Desc.Digest != d {
		t.Fatalf("item %+v", it)
	}
	_, err = publish.FromCAS(s, l, grep, "darwin-aarch64")
	errtest.WantToken(t, err, errs.NotFound, "darwin-aarch64")
}

// Outside a project there is no lock: the CAS's pull records say what was pulled as what.
func TestPublishFromRecords(t *testing.T) {
	s, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	grep := ref.Name{Scope: "acme", Name: "grep"}
	ingest := func(version string, outcome cas.Outcome, platform string) digest.Digest {
		blob := artifacttest.Spec{Name: "grep", Version: version, Description: platform, Wasm: artifacttest.Tagged("grep")}.Zip()
		d, err := s.Ingest(context.Background(), bytes.NewReader(blob), -1, "")
		if err != nil {
			t.Fatal(err)
		}
		s.AppendRecord(cas.Record{Name: grep.String(), Version: version, Platform: platform, Digest: d, Size: int64(len(blob)), Outcome: outcome})
		return d
	}
	v1 := ingest("1.9.0", cas.OutcomePulled, "any")
	v2 := ingest("1.10.0", cas.OutcomeCacheHit, "any")
	failed := ingest("2.0.0", cas.OutcomeFailed, "any") // a failed pull pins nothing
	host := ingest("1.10.0", cas.OutcomePulled, ref.HostPlatform())
	gone := ingest("3.0.0", cas.OutcomePulled, "any")
	os.Remove(s.Path(gone)) // gc took it: it can't be pushed
	_ = failed

	for _, c := range []struct {
		version, platform string
		want              digest.Digest
	}{
		{"1.9.0", "any", v1},
		{ref.Latest, "any", host}, // 1.10.0, and this machine's build wins over "any"
		{"1.10.0", "darwin-x86_64", v2},
	} {
		it, err := publish.FromCAS(s, nil, ref.Ref{Name: grep, Version: c.version}, c.platform)
		if err != nil || it.Desc.Digest != c.want || it.Desc.Name != grep || it.Desc.Title == "" {
			t.Fatalf("%s for %s: %+v, %v; want %s", c.version, c.platform, it.Desc, err, c.want)
		}
	}
	for _, version := range []string{"2.0.0", "3.0.0", "4.0.0"} {
		_, err := publish.FromCAS(s, nil, ref.Ref{Name: grep, Version: version}, "any")
		errtest.WantToken(t, err, errs.NotFound, "acme/grep@"+version, "pull records", "mur pull")
	}
}
