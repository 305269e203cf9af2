//go:build unix

package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// storeSize sums the sizes of the regular files under dir, as the disk holds them.
func storeSize(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return nil
	})
	return n
}

// A guest that writes to its state store as fast and as far as it can stops at the quota, by
// every way it can grow a file: writes, appends, writes at a far offset, truncates, new files.
// Removing and truncating gives the room back.
func TestStateStoreQuotaHoldsAgainstAGuestFillingIt(t *testing.T) {
	t.Parallel()
	work, store := t.TempDir(), t.TempDir()
	const limit = 64 << 10
	os.WriteFile(filepath.Join(store, "old.txt"), make([]byte, 16<<10), 0o600) // counted from the start
	fsys := openFSWithStore(t, work, store, false)
	q, err := newQuota(fsys.state.dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	fsys.state.quota = q
	const create = experimentalsys.O_WRONLY | experimentalsys.O_CREAT

	f, e := fsys.OpenFile("state/fill.bin", create, 0o600)
	wantErrno(t, "open", e, 0)
	chunk := make([]byte, 4096)
	written := 0
	for i := 0; i < 100; i++ {
		n, e := f.Write(chunk)
		written += n
		if e != 0 {
			wantErrno(t, "the write past the quota", e, errQuota)
			break
		}
	}
	if got := storeSize(t, store); got > limit || written != limit-16<<10 {
		t.Fatalf("the store holds %d bytes (%d written by the guest), over the quota of %d", got, written, limit)
	}
	// Rewriting bytes the file already holds costs nothing, even at the quota.
	if _, e := f.Pwrite(chunk, 0); e != 0 {
		t.Fatalf("an overwrite in place at the quota: %v", e)
	}
	if _, e := f.Seek(0, 0); e != 0 {
		t.Fatal(e)
	}
	if _, e := f.Write(chunk); e != 0 {
		t.Fatalf("an overwrite from the file's offset at the quota: %v", e)
	}
	_, e = f.Pwrite([]byte("x"), 1<<30)
	wantErrno(t, "a write at 1 GiB", e, errQuota)
	wantErrno(t, "a truncate to 1 GiB", f.Truncate(1<<30), errQuota)
	g, e := fsys.OpenFile("state/more.bin", create|experimentalsys.O_APPEND, 0o600)
	wantErrno(t, "open another", e, 0)
	_, e = g.Write(chunk)
	wantErrno(t, "an append to another file", e, errQuota)
	if got := storeSize(t, store); got > limit {
		t.Fatalf("the store holds %d bytes, over the quota of %d", got, limit)
	}

	// Room comes back as files shrink or go.
	wantErrno(t, "truncate", f.Truncate(0), 0)
	_, e = g.Write(chunk)
	wantErrno(t, "a write after a truncate freed room", e, 0)
	wantErrno(t, "unlink", fsys.Unlink("state/old.txt"), 0)
	h, e := fsys.OpenFile("state/fill.bin", create|experimentalsys.O_TRUNC, 0o600)
	wantErrno(t, "open with O_TRUNC", e, 0)
	if n, e := h.Write(make([]byte, limit-4096)); e != 0 || n != limit-4096 {
		t.Fatalf("after freeing room: %d bytes, %v", n, e)
	}
	f.Close()
	g.Close()
	h.Close()

	// The workdir has no quota: it is the user's own folder.
	w, e := fsys.OpenFile("big.bin", create, 0o600)
	wantErrno(t, "open in the workdir", e, 0)
	if _, e := w.Pwrite([]byte("x"), 1<<20); e != 0 {
		t.Fatalf("a write in the workdir: %v", e)
	}
	w.Close()
}

// limits.state_mib reaches the mounted store: narrowed by an artifact, defaulted when unset,
// and enforced on the folders p.open mounts.
func TestStateQuotaFromTheCapsule(t *testing.T) {
	t.Parallel()
	narrow := "  - name: acme/grep\n    version: \"1.0.0\"\n    capabilities:\n      limits: { state_mib: 1 }\n"
	for _, tt := range []struct {
		caps      string
		artifacts []string
		want      int
	}{
		{"  state: {}\n", nil, DefaultStateMiB},
		{"  state: {}\n  limits: { state_mib: 4 }\n", nil, 4},
		{"  state: {}\n  limits: { state_mib: 4 }\n", []string{narrow}, 1},
		{"", nil, 0},
	} {
		w := newWorld(t)
		p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML(tt.caps, tt.artifacts...)), "grep"))
		if err != nil {
			t.Fatal(err)
		}
		if p.StateMiB != tt.want {
			t.Fatalf("%q: state quota %d MiB, want %d", tt.caps, p.StateMiB, tt.want)
		}
		if tt.want != 1 {
			continue
		}
		fsys, err := p.open()
		if err != nil {
			t.Fatal(err)
		}
		f, e := fsys.OpenFile("state/big", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o600)
		wantErrno(t, "open", e, 0)
		_, e = f.Pwrite([]byte("x"), 1<<20)
		wantErrno(t, "a write past 1 MiB", e, errQuota)
		f.Close()
		fsys.Close()
	}
}

// A file the store holds under two names (hard links a host tool made; a guest can't make one)
// costs its size once, and dropping one of its names gives nothing back while the other still
// holds the data: were it refunded, the guest could write a whole quota more on top of it. The
// last name going gives the bytes back.
func TestStateQuotaChargesAHardLinkedFileOnceAndKeepsItWhileALinkHoldsIt(t *testing.T) {
	t.Parallel()
	const size, limit = 16 << 10, 64 << 10
	const create = experimentalsys.O_WRONLY | experimentalsys.O_CREAT
	for _, tt := range []struct {
		name string
		drop func(fsys *rootFS, name string) experimentalsys.Errno // takes name away
	}{
		{"unlink", func(fsys *rootFS, name string) experimentalsys.Errno { return fsys.Unlink("state/" + name) }},
		{"rename over", func(fsys *rootFS, name string) experimentalsys.Errno {
			return fsys.Rename("state/empty", "state/"+name)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			work, store := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(store, "a.bin"), make([]byte, size), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(filepath.Join(store, "a.bin"), filepath.Join(store, "b.bin")); err != nil {
				t.Fatal(err)
			}
			fsys := openFSWithStore(t, work, store, false)
			q, err := newQuota(fsys.state.dir, limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := q.used.Load(); got != size {
				t.Fatalf("a file under two names is charged %d bytes, want its size %d once", got, size)
			}
			fsys.state.quota = q
			// fill writes 4 KiB at a time until the quota stops it and says how much it took.
			fill := func(name string) int {
				t.Helper()
				f, e := fsys.OpenFile("state/"+name, create, 0o600)
				wantErrno(t, "open "+name, e, 0)
				defer f.Close()
				written := 0
				for written <= limit {
					n, e := f.Write(make([]byte, 4096))
					written += n
					if e != 0 {
						wantErrno(t, "the write past the quota", e, errQuota)
						return written
					}
				}
				t.Fatalf("%d bytes written past a quota of %d", written, limit)
				return 0
			}
			empty, e := fsys.OpenFile("state/empty", create, 0o600)
			wantErrno(t, "create empty", e, 0)
			empty.Close()

			wantErrno(t, "drop b.bin", tt.drop(fsys, "b.bin"), 0)
			if n := fill("fill1.bin"); n != limit-size {
				t.Fatalf("with a.bin still holding %d bytes, the guest wrote %d more, want %d", size, n, limit-size)
			}
			if got := storeSize(t, store); got > limit {
				t.Fatalf("the store holds %d bytes, over the quota of %d", got, limit)
			}

			// The last name going frees the data, and its bytes come back.
			if tt.name == "rename over" {
				f, e := fsys.OpenFile("state/empty", create, 0o600)
				wantErrno(t, "create empty again", e, 0)
				f.Close()
			}
			wantErrno(t, "drop a.bin", tt.drop(fsys, "a.bin"), 0)
			if n := fill("fill2.bin"); n != size {
				t.Fatalf("after a.bin's last name went, the guest wrote %d bytes, want the %d it freed", n, size)
			}
		})
	}
}
