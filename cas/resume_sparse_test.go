//go:build unix

package cas

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"
)

// A store's claimed size is not reserved on disk: an ingest written at offsets takes blocks only
// for the bytes that arrived, and so does what an interrupt keeps of it.
func TestPartsReserveOnlyWhatArrived(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	info := ResumeInfo{Digest: digest.FromString("claimed"), Size: 2 << 30, Store: "oci://registry.test/murmur"}
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Parts(info.Size, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt(patternBytes(33, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	w.Keep()
	w.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded()), &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 8<<20 {
		t.Fatalf("the kept ingest takes %d bytes of disk after 1 MiB arrived of a claimed 2 GiB", used)
	}
}
