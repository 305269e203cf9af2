package cas

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// VerifyAllWith hands inspect every blob as it re-hashes it, in the same read: a blob that
// hashes right but that inspect refuses is quarantined and listed in inspect's words; one that
// hashes wrong is listed as damaged whatever inspect says; the rest stay, counted with all their
// bytes.
func TestVerifyAllWithInspect(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	datas := []string{"good blob, kept", "refused blob", "damaged blob, refused too"}
	var ds []digest.Digest
	var total int64
	for _, b := range datas {
		d, err := s.Ingest(ctx, strings.NewReader(b), int64(len(b)), digest.FromString(b))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		total += int64(len(b))
	}
	corrupt(t, s, ds[2], 0)
	rep, err := s.VerifyAllWith(ctx, 2, func(blob ReaderAt, stream io.Reader) error {
		b, err := io.ReadAll(stream)
		if err != nil {
			return err
		}
		at := make([]byte, len(b))
		if n, _ := blob.ReadAt(at, 0); n != len(b) || !bytes.Equal(at, b) || blob.Size() != int64(len(b)) {
			return errors.New("the blob and the stream differ")
		}
		if bytes.Contains(b, []byte("refused")) {
			return errs.New(errs.InvalidArtifact, "inspect refuses %q", b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != 3 || rep.Bytes != total || len(rep.Damaged) != 2 {
		t.Fatalf("report %+v; want 3 blobs of %d bytes checked, 2 damaged", rep, total)
	}
	for _, dm := range rep.Damaged {
		switch dm.Digest {
		case ds[1]:
			if !strings.Contains(dm.Problem, `inspect refuses "refused blob"`) || dm.Quarantined == "" || !strings.Contains(dm.Problem, dm.Quarantined) {
				t.Errorf("the refused blob: %+v", dm)
			}
		case ds[2]:
			if !strings.Contains(dm.Problem, "damaged on disk") || strings.Contains(dm.Problem, "inspect refuses") || dm.Quarantined == "" {
				t.Errorf("the damaged blob: %+v", dm)
			}
		default:
			t.Errorf("unexpected damage %+v", dm)
		}
	}
	if !s.Has(ds[0]) || s.Has(ds[1]) || s.Has(ds[2]) {
		t.Fatalf("after VerifyAllWith: has %v %v %v; want only the good blob", s.Has(ds[0]), s.Has(ds[1]), s.Has(ds[2]))
	}
}
