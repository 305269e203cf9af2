package cas

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

var ctx = context.Background()

func TestIngestRoundTrip(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(1, 3<<20+17) // not a multiple of the chunk size
	want := digest.FromBytes(data)
	got, err := s.Ingest(ctx, bytes.NewReader(data), int64(len(data)), want)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Ingest = %s, want %s", got, want)
	}
	if !s.Has(want) {
		t.Fatal("Has = false after Ingest")
	}
	if p := s.Path(want); p != filepath.Join(s.Root(), "blobs", "sha256", want.Encoded()) {
		t.Fatalf("Path = %s", p)
	}
	fi, err := os.Stat(s.Path(want))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 {
		t.Fatalf("blob mode %v, want 0444", fi.Mode().Perm())
	}
	for _, dir := range []string{"", "blobs", "blobs/sha256", "ingest", "records", "quarantine", "uses"} {
		fi, err := os.Stat(filepath.Join(s.Root(), dir))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s mode %v, want 0700", dir, fi.Mode().Perm())
		}
	}
	info, err := s.Stat(want)
	if err != nil || info.Size != int64(len(data)) || info.Digest != want {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	for _, open := range []func(context.Context, digest.Digest) (ReaderAt, error){s.ReaderAt, s.VerifiedReaderAt} {
		ra, err := open(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(io.NewSectionReader(ra, 0, ra.Size()))
		ra.Close()
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("read back %d bytes, err %v", len(back), err)
		}
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after a commit", names)
	}
	// Ingesting the same bytes again is a success that leaves one blob.
	if _, err := s.Ingest(ctx, bytes.NewReader(data), -1, ""); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Digest != want {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestOpenTightensLoosenedFolders(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ingest := filepath.Join(s.Root(), "ingest")
	if err := os.Chmod(ingest, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(s.Root()); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(ingest)
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("ingest/ mode %v after Open, want 0700", fi.Mode().Perm())
	}
}

func TestEmptyBlob(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, err := s.Ingest(ctx, strings.NewReader(""), 0, digest.FromBytes(nil))
	if err != nil || d != digest.FromBytes(nil) || !s.Has(d) {
		t.Fatalf("Ingest(empty) = %s, %v", d, err)
	}
}

func TestIngestRefusesMismatches(t *testing.T) {
	t.Parallel()
	data := patternBytes(2, 2<<20+5)
	good := digest.FromBytes(data)
	other := digest.FromBytes([]byte("something else"))
	cases := []struct {
		name    string
		stream  []byte
		size    int64
		want    digest.Digest
		mention []string // values the sentence must name
	}{
		{"shorter than announced", data[:len(data)-1], int64(len(data)), good, []string{"2097157", "2097156"}},
		{"longer than announced", append(append([]byte{}, data...), 'x'), int64(len(data)), good, []string{"2097157", "2097158"}},
		{"wrong digest", data, int64(len(data)), other, []string{string(other), string(good)}},
		{"wrong digest, size unchecked", data, -1, other, []string{string(other), string(good)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t)
			_, err := s.Ingest(ctx, bytes.NewReader(c.stream), c.size, c.want)
			if !errors.Is(err, errs.Integrity) {
				t.Fatalf("err = %v, want integrity", err)
			}
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
			if s.Has(good) || s.Has(other) || s.Has(digest.FromBytes(c.stream)) {
				t.Error("a blob is visible after a refused ingest")
			}
			if names := dirNames(t, filepath.Join(s.Root(), "blobs", "sha256")); len(names) != 0 {
				t.Errorf("blobs/sha256 holds %v", names)
			}
			if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
				t.Errorf("ingest/ holds %v", names)
			}
		})
	}
}

func TestWriterStagesUntilCommit(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(3, 1<<20+999)
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Small writes, as a network body delivers them.
	for off := 0; off < len(data); off += 4093 {
		if _, err := w.Write(data[off:min(off+4093, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if w.Size() != int64(len(data)) {
		t.Fatalf("Size = %d", w.Size())
	}
	if w.Digest() != digest.FromBytes(data) {
		t.Fatal("Digest before commit differs from the data's")
	}
	buf := make([]byte, 100)
	if n, err := w.ReadAt(buf, 1<<20); err != nil || n != 100 || !bytes.Equal(buf, data[1<<20:1<<20+100]) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	tail := make([]byte, 2000)
	if n, err := w.ReadAt(tail, int64(len(data)-1000)); n != 1000 || err != io.EOF || !bytes.Equal(tail[:n], data[len(data)-1000:]) {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	if s.Has(digest.FromBytes(data)) {
		t.Fatal("blob visible before Commit")
	}
	// Writing goes on after a ReadAt.
	if _, err := w.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	full := append(append([]byte{}, data...), "more"...)
	d, err := w.Commit(ctx, int64(len(full)), digest.FromBytes(full))
	if err != nil || d != digest.FromBytes(full) {
		t.Fatalf("Commit = %s, %v", d, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after Commit: %v", err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Commit succeeded")
	}
	if !s.Has(d) {
		t.Fatal("blob not visible after Commit")
	}
}

func TestWriterCloseAborts(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(patternBytes(4, 3<<20))
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 1 {
		t.Fatalf("ingest/ holds %v during the ingest, want one temporary file", names)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after Close", names)
	}
	if _, err := w.Commit(ctx, -1, ""); err == nil {
		t.Fatal("Commit after Close succeeded")
	}
	if l, _ := s.List(ctx); len(l) != 0 {
		t.Fatalf("List = %v", l)
	}
}

func TestIngestHonoursCancel(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Ingest(c, newPattern(5, 8<<20), -1, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
}

func TestBadDigestsRefused(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	good, err := s.Ingest(ctx, strings.NewReader("hello"), 5, "")
	if err != nil {
		t.Fatal(err)
	}
	bad := []digest.Digest{
		"not-a-digest",
		"sha256:" + digest.Digest(strings.ToUpper(good.Encoded())),
		"sha256:abc",
		"sha256:../../../../etc/passwd",
		"sha512:" + digest.Digest(strings.Repeat("ab", 64)),
		"md5:d41d8cd98f00b204e9800998ecf8427e",
		digest.Digest(good.Encoded()), // bare hex
	}
	for _, d := range bad {
		if s.Has(d) {
			t.Errorf("Has(%q) = true", d)
		}
		if p := s.Path(d); p != "" {
			t.Errorf("Path(%q) = %q, want empty", d, p)
		}
		checks := map[string]error{}
		_, checks["Stat"] = s.Stat(d)
		_, checks["ReaderAt"] = s.ReaderAt(ctx, d)
		_, checks["VerifiedReaderAt"] = s.VerifiedReaderAt(ctx, d)
		checks["Verify"] = s.Verify(ctx, d)
		checks["Touch"] = s.Touch(d)
		_, checks["Ingest"] = s.Ingest(ctx, strings.NewReader("hello"), 5, d)
		_, checks["Records"] = s.Records(d)
		checks["AppendRecord"] = s.AppendRecord(Record{Ref: "acme/x", Digest: d})
		w, err := s.NewWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("hello"))
		_, checks["Commit"] = w.Commit(ctx, 5, d)
		for name, err := range checks {
			if !errors.Is(err, errs.Usage) {
				t.Errorf("%s(%q) err = %v, want usage", name, d, err)
			}
		}
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
	if list, _ := s.List(ctx); len(list) != 1 {
		t.Fatalf("List = %v, want the one good blob", list)
	}
	if r, _ := s.Records(""); len(r) != 0 {
		t.Fatalf("records were written for bad digests: %v", r)
	}
}

func TestStatMissingIsNotFound(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d := digest.FromBytes([]byte("absent"))
	if _, err := s.Stat(d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("Stat err = %v", err)
	}
	if _, err := s.ReaderAt(ctx, d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("ReaderAt err = %v", err)
	}
	if _, err := s.VerifiedReaderAt(ctx, d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("VerifiedReaderAt err = %v", err)
	}
	if err := s.Verify(ctx, d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("Verify err = %v", err)
	}
}

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

func TestRecords(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	a, b := digest.FromBytes([]byte("a")), digest.FromBytes([]byte("b"))
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	recs := []Record{
		{Time: when, Ref: "acme/grep@1.2.0", Name: "acme/grep", Version: "1.2.0", Platform: "any", Digest: a, Size: 10, Source: "github:acme/murmur-artifacts", Release: "v1.2.0", Asset: "grep.mur.zip", OwnerID: 42, Transferred: 10, DurationMS: 7, Outcome: OutcomePulled},
		{Time: when, Ref: "acme/grep@1.2.0", Digest: a, Outcome: OutcomeCacheHit},
		{Time: when, Ref: "acme/sed", Digest: b, Outcome: OutcomePulled},
	}
	for _, r := range recs {
		if err := s.AppendRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Records("")
	if err != nil || len(all) != 3 {
		t.Fatalf("Records = %v, %v", all, err)
	}
	if !reflect.DeepEqual(all[0], recs[0]) {
		t.Fatalf("round trip: %+v != %+v", all[0], recs[0])
	}
	raw, _ := os.ReadFile(filepath.Join(s.Root(), "records", "records.jsonl"))
	for _, field := range []string{`"owner_id":42`, `"duration_ms":7`, `"outcome":"pulled"`, `"digest":"` + string(a)} {
		if !bytes.Contains(raw, []byte(field)) {
			t.Errorf("records file lacks %s: %s", field, raw)
		}
	}
	only, _ := s.Records(a)
	if len(only) != 2 {
		t.Fatalf("Records(a) = %d records, want 2", len(only))
	}

	// A crash in the middle of an append leaves a torn line.
	f, _ := os.OpenFile(filepath.Join(s.Root(), "records", "records.jsonl"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte(`{"time":"2026-01-02T03:04:05Z","ref":"acme/torn","dig`))
	f.Close()
	got, err := s.Records("")
	if err != nil || len(got) != 3 {
		t.Fatalf("Records with a torn last line = %d, %v; want the 3 whole ones", len(got), err)
	}
	// The next append starts a fresh line rather than gluing onto the wreck.
	if err := s.AppendRecord(Record{Time: when, Ref: "acme/after", Outcome: OutcomeFailed, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Records("")
	if len(got) != 4 || got[3].Ref != "acme/after" || got[3].Error != "boom" {
		t.Fatalf("after the torn line: %+v", got)
	}
}

func TestGC(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	now := time.Now()
	old := now.Add(-60 * 24 * time.Hour)
	ingest := func(seed uint64) digest.Digest {
		d, err := s.Ingest(ctx, newPattern(seed, 1000+int64(seed)), -1, "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	setLastUse := func(d digest.Digest, at time.Time) {
		os.Chtimes(s.Path(d), at, at)
		os.Chtimes(filepath.Join(s.Root(), "uses", d.Encoded()), at, at)
	}
	kept, stale, fresh, touched := ingest(1), ingest(2), ingest(3), ingest(4)
	setLastUse(kept, old)
	setLastUse(stale, old)
	setLastUse(touched, old)
	if err := s.Touch(touched); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Stat(touched); now.Sub(info.LastUse) > time.Minute {
		t.Fatalf("Touch did not move the last use: %v", info.LastUse)
	}

	// A leftover of a killed ingest, and a live ingest that has been quiet for a long time.
	leftover := filepath.Join(s.Root(), "ingest", ".mur-tmp-blob-dead")
	os.WriteFile(leftover, []byte("partial"), 0o600)
	os.Chtimes(leftover, old, old)
	live, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	live.Write([]byte("in flight"))
	live.flush()
	os.Chtimes(live.tmp, old, old)
	// A leftover too young to judge.
	young := filepath.Join(s.Root(), "ingest", ".mur-tmp-blob-young")
	os.WriteFile(young, []byte("partial"), 0o600)

	opt := GCOptions{Keep: map[digest.Digest]bool{kept: true}, OlderThan: 30 * 24 * time.Hour, Now: now, DryRun: true}
	dry, err := s.GC(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Blobs) != 1 || dry.Blobs[0].Digest != stale || len(dry.Ingest) != 1 || dry.Ingest[0] != leftover || dry.Kept != 3 {
		t.Fatalf("dry run report = %+v", dry)
	}
	for _, d := range []digest.Digest{kept, stale, fresh, touched} {
		if !s.Has(d) {
			t.Fatalf("dry run removed %s", d)
		}
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Fatal("dry run removed the leftover")
	}

	opt.DryRun = false
	rep, err := s.GC(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Blobs) != 1 || rep.Blobs[0].Digest != stale || len(rep.Ingest) != 1 || rep.Freed != 1002+7 {
		t.Fatalf("report = %+v", rep)
	}
	if s.Has(stale) || !s.Has(kept) || !s.Has(fresh) || !s.Has(touched) {
		t.Fatal("GC removed the wrong blobs")
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatal("GC kept the leftover")
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatal("GC removed a leftover younger than the grace")
	}
	// The live ingest survived and still commits.
	if _, err := live.Commit(ctx, 9, digest.FromBytes([]byte("in flight"))); err != nil {
		t.Fatalf("the live ingest was broken by GC: %v", err)
	}
	// Without Keep, an old enough horizon removes the kept blob too.
	setLastUse(kept, old)
	rep, err = s.GC(ctx, GCOptions{OlderThan: 30 * 24 * time.Hour, Now: now})
	if err != nil || len(rep.Blobs) != 1 || rep.Blobs[0].Digest != kept {
		t.Fatalf("second GC = %+v, %v", rep, err)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset by peer")
	}
	m := min(len(p), r.n)
	r.n -= m
	return m, nil
}

func TestIngestStreamErrorLeavesNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	_, err := s.Ingest(ctx, &failingReader{n: 3 << 20}, -1, "")
	if !errors.Is(err, errs.IO) || !strings.Contains(err.Error(), "connection reset") || !strings.Contains(err.Error(), "3145728") {
		t.Fatalf("err = %v, want an io error naming the cause and the bytes read", err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
	if l, _ := s.List(ctx); len(l) != 0 {
		t.Fatalf("List = %v", l)
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
