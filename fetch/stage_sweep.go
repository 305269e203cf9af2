package fetch

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/atomicfile"
)

// Staging writes each tools/<scope>/<name>/ into a temporary folder beside it (.mur-tmp-…) and
// moves it into place; a pull killed meanwhile leaves that folder behind, sometimes hundreds of
// megabytes. A live staging holds an flock on its folder for as long as the folder exists under
// its temporary name, so a folder whose flock can be taken belongs to a process that is gone.
// stagingGrace covers the instant between creating the folder and locking it.
const stagingGrace = cas.IngestGrace

// holdFolder opens dir and flocks it, marking it as in use by this process.
func holdFolder(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "flock", Path: dir, Err: err}
	}
	return f, nil
}

// sweepStaging removes the staging leftovers in proj's tools/ that no live process holds, and
// returns their paths. It follows no symlink: tools/ and each scope folder are taken only when
// they are real folders. With dryRun it only lists them.
func sweepStaging(proj Project, now time.Time, dryRun bool) []string {
	var gone []string
	tools := proj.ToolsDir()
	if fi, err := os.Lstat(tools); err != nil || !fi.IsDir() {
		return nil
	}
	scopes, err := os.ReadDir(tools)
	if err != nil {
		return nil
	}
	for _, sc := range scopes {
		if !sc.IsDir() { // a DirEntry of a symlink is not a folder
			continue
		}
		scopeDir := filepath.Join(tools, sc.Name())
		entries, err := os.ReadDir(scopeDir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
				continue
			}
			p := filepath.Join(scopeDir, e.Name())
			fi, err := e.Info()
			if err != nil || now.Sub(fi.ModTime()) < stagingGrace {
				continue
			}
			hold, err := holdFolder(p)
			if err != nil {
				continue // a live staging holds it
			}
			if dryRun || os.RemoveAll(p) == nil {
				gone = append(gone, p)
			}
			hold.Close()
		}
	}
	return gone
}

// mkdirAllRecorded is os.MkdirAll(dir, 0o755) that returns the folders it made, deepest last,
// never above stop.
func mkdirAllRecorded(dir, stop string) ([]string, error) {
	var missing []string
	for d := dir; d != stop && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for i, j := 0, len(missing)-1; i < j; i, j = i+1, j-1 {
		missing[i], missing[j] = missing[j], missing[i]
	}
	return missing, nil
}

// removeCreated removes the folders mkdirAllRecorded made, deepest first, each only while it is
// empty: another pull may be staging into one meanwhile.
func removeCreated(dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}
