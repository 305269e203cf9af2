package stage

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/atomicfile"
)

// Staging writes each tools/<scope>/<name>/ into a temporary folder beside it (.mur-tmp-…) and
// moves it into place; a pull killed meanwhile leaves that folder behind, sometimes hundreds of
// megabytes. A live staging holds an flock on its folder for as long as the folder exists under
// its temporary name, so a folder whose flock can be taken belongs to a process that is gone.
// stagingGrace covers the instant between creating the folder and locking it.
const stagingGrace = cas.IngestGrace

// sweepStaging removes the staging leftovers in tools/ that no live process holds, and
// returns their paths. It follows no symlink: tools/ and each scope folder are taken only when
// they are real folders. With dryRun it only lists them.
func Sweep(t Tools, now time.Time, dryRun bool) []string {
	var gone []string
	root, err := os.OpenRoot(t.Project)
	if err != nil {
		return nil
	}
	defer root.Close()
	toolsName := filepath.Base(t.Dir())
	tools, err := openRealDir(root, toolsName)
	if err != nil {
		return nil
	}
	defer tools.Close()
	scopes, err := fs.ReadDir(tools.FS(), ".")
	if err != nil {
		return nil
	}
	for _, sc := range scopes {
		if !sc.IsDir() { // a DirEntry of a symlink is not a folder
			continue
		}
		scope, err := openRealDir(tools, sc.Name())
		if err != nil {
			continue
		}
		scopeDir := filepath.Join(t.Dir(), sc.Name())
		entries, _ := fs.ReadDir(scope.FS(), ".")
		for _, e := range entries {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
				continue
			}
			p := filepath.Join(scopeDir, e.Name())
			fi, err := e.Info()
			if err != nil || now.Sub(fi.ModTime()) < stagingGrace {
				continue
			}
			hold, err := holdIn(scope, e.Name())
			if err != nil {
				continue // a live staging holds it
			}
			if dryRun || scope.RemoveAll(e.Name()) == nil {
				gone = append(gone, p)
			}
			hold.Close()
		}
		scope.Close()
	}
	return gone
}
