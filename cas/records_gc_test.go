package cas

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
)

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
