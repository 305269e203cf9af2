package fetch

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// murmur.yaml is written by people and their editors while mur runs. An editor that saves by
// truncating the file and writing it again leaves, for a moment, an empty or half-written file;
// a read that falls in that moment sees a murmur.yaml that declares less than the user's, and a
// prune that followed it would drop pins, and their provenance records, nobody removed. So
// murmur.yaml is read so that a torn read shows:
//   - stable: stat, read, read again, stat again. The two reads must agree byte for byte, the
//     two stats on size, modification time, inode and change time, and the size on the bytes
//     read; a read that changed under it is tried again, up to stableTries times.
//   - settled: a file changed less than settleWindow ago may be mid-save. Only a prune asks
//     this (transition.go): one that would drop pins after such a read waits for the file to
//     settle and reads it again, up to settleRounds times, before it declines.

const (
	stableTries  = 5
	settleRounds = 4
)

// Seams for tests (export_test.go): readSeams are called as murmur.yaml is read; settleNanos is
// settleWindow, shortened by a test that races a writer in a loop.
var (
	readSeams   atomic.Pointer[readSeam]
	settleNanos atomic.Int64
)

type readSeam struct {
	torn func(path string, try int) // between a try's first stat and its first read, from try 0
	done func(path string)          // once readStable has its answer
}

// settleWindow is how long a file must have been left alone for its read to count as settled.
const settleWindow = 250 * time.Millisecond

func settle() time.Duration {
	if d := settleNanos.Load(); d > 0 {
		return time.Duration(d)
	}
	return settleWindow
}

// yamlRead is one read of murmur.yaml.
type yamlRead struct {
	data    []byte
	info    fs.FileInfo // the stat after the read
	stable  bool        // nothing changed while it was read
	changed time.Time   // when the file last changed (safefile.ChangeTime)
}

// settledIn is how long the read must still wait for the file to count as settled: 0 once it
// has been left alone for the settle window. A change time in the future (another machine's
// clock, on a network file system) never settles.
func (r yamlRead) settledIn(now time.Time) time.Duration {
	age := now.Sub(r.changed)
	if age >= settle() {
		return 0
	}
	if age < 0 {
		return settle()
	}
	return settle() - age
}

// readStable reads murmur.yaml at path until one read is stable, at most stableTries times; the
// last read is returned either way, with stable saying which it was. A missing file is an error
// that wraps fs.ErrNotExist.
func readStable(path string) (yamlRead, error) {
	var r yamlRead
	if seams := readSeams.Load(); seams != nil && seams.done != nil {
		defer seams.done(path)
	}
	for try := range stableTries {
		before, err := os.Lstat(path)
		if err != nil {
			return yamlRead{}, statError(path, err)
		}
		if seams := readSeams.Load(); seams != nil && seams.torn != nil {
			seams.torn(path, try)
		}
		first, err := manifest.Read(path)
		if err != nil {
			return yamlRead{}, err
		}
		again, err := manifest.Read(path)
		if err != nil {
			return yamlRead{}, err
		}
		after, err := os.Lstat(path)
		if err != nil {
			return yamlRead{}, statError(path, err)
		}
		r = yamlRead{data: again, info: after, changed: safefile.ChangeTime(after)}
		if r.stable = steady(before, after, first, again); r.stable {
			return r, nil
		}
	}
	return r, nil
}

// steady reports whether a try read a file that held still: the two reads agree, the two stats
// show the same file unchanged, and it holds the bytes read. The last catches a save that
// truncated and rewrote the file between the stats within one tick of its coarse clock, which
// leaves no trace in the stat but the length of what the reads saw.
func steady(before, after fs.FileInfo, first, again []byte) bool {
	return bytes.Equal(first, again) && sameFile(before, after) && after.Size() == int64(len(again))
}

// sameFile reports whether two stats of one path show the same, unchanged file.
func sameFile(a, b fs.FileInfo) bool {
	return a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && a.Mode() == b.Mode() &&
		safefile.Stamp(a) == safefile.Stamp(b)
}

func statError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return errs.Wrap(err, errs.IO, "can't read %s: %v", path, errs.OSCause(err))
}

// loadIntent reads and parses murmur.yaml as a command starts: from a stable read, so that the
// intent it starts from is not one an editor was halfway through saving.
func loadIntent(path string) (*manifest.Capsule, error) {
	r, err := readStable(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.NotFound, "%s does not exist; run mur in a capsule folder, beside its murmur.yaml", path)
	}
	if err != nil {
		return nil, err
	}
	if !r.stable {
		return nil, unstable(path)
	}
	return manifest.Parse(r.data, path)
}

func unstable(path string) error {
	return errs.New(errs.IO, "%s changed each of the %d times mur read it, so mur did not act on it and changed nothing; wait until whatever is writing it (an editor saving it) is done, then run the command again", path, stableTries)
}
