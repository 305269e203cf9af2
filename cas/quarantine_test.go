package cas

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// corrupt flips one byte of a blob in place, as a bad disk or a careless hand would.
func corrupt(t *testing.T, s *Store, d digest.Digest, at int64) {
	t.Helper()
	p := s.Path(d)
	os.Chmod(p, 0o644)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	f.ReadAt(b, at)
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Chmod(p, 0o444)
}

func TestCorruptionIsFoundAndQuarantined(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	var ds []digest.Digest
	var datas [][]byte
	for i := range 5 {
		data := patternBytes(uint64(10+i), int64(1<<20+i*1000))
		d, err := s.Ingest(ctx, bytes.NewReader(data), int64(len(data)), "")
		if err != nil {
			t.Fatal(err)
		}
		ds, datas = append(ds, d), append(datas, data)
	}
	quarantine := filepath.Join(s.Root(), "quarantine")

	// Verify finds one.
	corrupt(t, s, ds[0], 12345)
	if err := s.Verify(ctx, ds[1]); err != nil {
		t.Fatalf("Verify of a good blob: %v", err)
	}
	err := s.Verify(ctx, ds[0])
	if !errors.Is(err, errs.Integrity) || !strings.Contains(err.Error(), string(ds[0])) {
		t.Fatalf("Verify err = %v, want integrity naming %s", err, ds[0])
	}
	if s.Has(ds[0]) {
		t.Fatal("Has = true for a quarantined blob")
	}
	if q := dirNames(t, quarantine); len(q) != 1 || !strings.HasPrefix(q[0], ds[0].Encoded()) {
		t.Fatalf("quarantine/ holds %v", q)
	}

	// VerifyAll finds two more, and a stray file.
	corrupt(t, s, ds[2], 0)
	corrupt(t, s, ds[4], int64(len(datas[4])-1))
	stray := filepath.Join(s.Root(), "blobs", "sha256", "not-a-digest")
	os.WriteFile(stray, []byte("x"), 0o444)
	rep, err := s.VerifyAll(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != 4 {
		t.Errorf("Checked = %d, want 4", rep.Checked)
	}
	damaged := map[digest.Digest]Damage{}
	for _, dm := range rep.Damaged {
		damaged[dm.Digest] = dm
		if dm.Quarantined == "" {
			t.Errorf("damage %+v not quarantined", dm)
		}
	}
	if len(rep.Damaged) != 3 || damaged[ds[2]].Path == "" || damaged[ds[4]].Path == "" || damaged[""].Path != stray {
		t.Fatalf("Damaged = %+v", rep.Damaged)
	}
	if s.Has(ds[2]) || s.Has(ds[4]) || !s.Has(ds[1]) || !s.Has(ds[3]) {
		t.Fatal("Has after VerifyAll is wrong")
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatal("stray file still in blobs/sha256")
	}

	// VerifiedReaderAt catches damage before handing out a byte.
	corrupt(t, s, ds[3], 777)
	if _, err := s.VerifiedReaderAt(ctx, ds[3]); !errors.Is(err, errs.Integrity) {
		t.Fatalf("reading a damaged blob: %v, want integrity", err)
	}
	if s.Has(ds[3]) {
		t.Fatal("VerifiedReaderAt left the damaged blob in place")
	}

	// The next ingest brings them back, and everything is clean again.
	for _, i := range []int{0, 2, 3, 4} {
		if _, err := s.Ingest(ctx, bytes.NewReader(datas[i]), int64(len(datas[i])), ds[i]); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = s.VerifyAll(ctx, 0)
	if err != nil || len(rep.Damaged) != 0 || rep.Checked != 5 {
		t.Fatalf("VerifyAll after re-ingest = %+v, %v", rep, err)
	}
}

func TestReingestReplacesTruncatedBlob(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(20, 100000)
	d, _ := s.Ingest(ctx, bytes.NewReader(data), -1, "")
	os.Chmod(s.Path(d), 0o644)
	os.Truncate(s.Path(d), 10)
	if _, err := s.Ingest(ctx, bytes.NewReader(data), -1, d); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx, d); err != nil {
		t.Fatalf("a re-ingest kept the truncated blob: %v", err)
	}
}

func TestGCEmptiesOldQuarantine(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, _ := s.Ingest(ctx, strings.NewReader("to be damaged"), -1, "")
	corrupt(t, s, d, 0)
	if err := s.Verify(ctx, d); !errors.Is(err, errs.Integrity) {
		t.Fatalf("Verify = %v", err)
	}
	quarantine := filepath.Join(s.Root(), "quarantine")
	// Within the horizon the damaged file stays for inspection.
	if rep, err := s.GC(ctx, GCOptions{OlderThan: time.Hour}); err != nil || len(rep.Quarantine) != 0 {
		t.Fatalf("GC = %+v, %v", rep, err)
	}
	if len(dirNames(t, quarantine)) != 1 {
		t.Fatal("quarantine emptied too early")
	}
	rep, err := s.GC(ctx, GCOptions{OlderThan: time.Hour, Now: time.Now().Add(2 * time.Hour)})
	if err != nil || len(rep.Quarantine) != 1 || rep.Freed != 13 {
		t.Fatalf("GC = %+v, %v", rep, err)
	}
	if names := dirNames(t, quarantine); len(names) != 0 {
		t.Fatalf("quarantine/ holds %v", names)
	}
}
