// Package stage puts pulled artifacts into a project's tools/ folder for people to read: the
// packed murmur.yaml and the payload of each, in tools/<scope>/<name>/, with a marker that lets
// `mur verify` check them without the CAS.
//
// It reaches tools/ only through folder handles held from the project folder down (os.Root), so a
// tools/ or scope folder replaced by a link mid-way is refused, never followed. Files:
//   - stage.go: Stage, CheckStaged and a staging prepared, then installed by one rename;
//   - root.go: the held folder handles; sweep.go: the leftovers of killed stagings;
//   - stream.go: a payload staged as its download arrives, checked before it is installed;
//   - payload.go: reading a packed artifact back from the CAS and checking its payload.
package stage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// stagedMarkerFile is the file in each tools/<scope>/<name>/ that says which blob it was staged
// from and the size and CRC-32 of each staged file, so that `mur verify` can check it without
// the CAS. CRC-32 suffices here: the staged files are a view for people and are never run, the
// checksums come from (or match) the zip whose SHA-256 the lock pins, and checking them costs
// a fraction of a SHA-256 pass, so staging a large payload is a kernel copy and nothing more.
const stagedMarkerFile = ".mur-staged.json"

type stagedMarker struct {
	Digest string            `json:"digest"`
	Files  map[string]string `json:"files"` // file name → "crc32:<8 hex>"
	Sizes  map[string]int64  `json:"sizes"` // file name → size, for the cheap check on every pull
	// Stamps are each file's inode, size and change time when it was staged (stamp). Writing a
	// file changes its ctime, and no user can set a ctime back, so an unchanged stamp proves
	// unchanged content and verify skips reading the file, as git trusts its index.
	Stamps map[string]string `json:"stamps,omitempty"`
}

// stamp is a file's inode, size and change time; "" when it can't be read.
func stamp(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return ""
	}
	return safefile.Stamp(fi)
}

// Tools is a project's tools/ folder. The stage reaches it only through the project folder that
// holds it, opened as a root, so that a tools/ (or a scope folder) replaced by a link is refused
// rather than followed out of the project.
type Tools struct {
	Project string // the folder that holds tools/
	// Budget, when set, bounds what the payloads staged through this value decompress to
	// together: a pull's (budget.go).
	Budget *Budget
}

// Dir is the tools/ folder itself.
func (t Tools) Dir() string { return filepath.Join(t.Project, "tools") }

// StagedDir is tools/<scope>/<name>/: the scoped name keeps two scopes' tools apart.
func StagedDir(tools Tools, name ref.Name) string {
	return filepath.Join(tools.Dir(), name.Scope, name.Name)
}

// Stage copies the packed murmur.yaml and the payload of blob d into tools/<scope>/<name>/.
// They are copies, never links to the CAS, so that editing them can't damage a blob. The folder
// is replaced whole: a reader sees the old set of files or the new one.
func Stage(tools Tools, store *cas.Store, name ref.Name, d digest.Digest) (string, error) {
	dir := StagedDir(tools, name)
	if isStaged(dir, d) {
		return dir, nil
	}
	st, err := PrepareFromCAS(context.Background(), tools, store, name, d)
	if err != nil || st == nil {
		return dir, err
	}
	return st.Install()
}

// prepareFromCAS prepares the staged folder of blob d, or returns nil when it is staged already.
func PrepareFromCAS(ctx context.Context, tools Tools, store *cas.Store, name ref.Name, d digest.Digest) (*Prepared, error) {
	dir := StagedDir(tools, name)
	if isStaged(dir, d) {
		return nil, nil
	}
	a, src, err := OpenPacked(ctx, store, d)
	if err != nil {
		return nil, errs.Wrap(err, errs.TokenOf(err), "can't stage %s: %s; run 'mur pull'", dir, errs.Message(err))
	}
	defer src.Close()
	return Prepare(tools, name, d, a, src, nil)
}

func isStaged(dir string, d digest.Digest) bool {
	m, err := readMarker(dir)
	return err == nil && m.Digest == d.String() && filesPresent(dir, m)
}

// preparedStage is a staged folder written beside its final place and not yet moved there.
type Prepared struct {
	dir, tmp string
	name     ref.Name
	d        digest.Digest
	hold     *os.File      // the temporary folder, flocked while it lives (see sweepStaging)
	h        *scopeHandles // the project and tools/<scope>/, held (see stage_root.go)
	tmpName  string        // tmp's name in the scope folder
	files    *os.Root      // tmp, held
	budget   *Budget       // what reserved the payload's size, given back if discarded
	reserved int64
}

// prepareStage writes the staged files of the packed file src (whose digest is d, already read
// as a) into a new temporary folder beside tools/<scope>/<name>/. It takes no lock and changes
// nothing anyone reads, so a pull can run it while the blob it came from is still being made
// durable. key, when not nil, is fed the payload as it is written (the compiled cache's key of
// it).
func Prepare(tools Tools, name ref.Name, d digest.Digest, a *artifact.Archive, src cas.ReaderAt, key hash.Hash) (*Prepared, error) {
	st, err := openStageDir(tools, name, d, a.PayloadSize)
	if err != nil {
		return nil, err
	}
	crc := crc32.NewIEEE()
	var n int64
	if off, size, ok := a.StoredPayload(); ok {
		n, err = copyStored(st.files, a.PayloadName, src, off, size, crc, key)
	} else {
		var pr io.ReadCloser
		if pr, err = a.OpenPayload(); err != nil {
			return st.fail(err)
		}
		n, err = writeStaged(st.files, a.PayloadName, pr, crc, key)
		pr.Close()
	}
	if err != nil {
		if errs.TokenOf(err) == errs.InvalidArtifact {
			return st.fail(err)
		}
		return st.fail(errs.Wrap(err, errs.IO, "%v", err))
	}
	if err := st.complete(a, n, crc.Sum32()); err != nil {
		return st.fail(err)
	}
	return st, nil
}

// openStageDir makes the temporary folder a staging fills, flocked while it lives, once the
// tools' budget has room for its payload of size bytes.
func openStageDir(tools Tools, name ref.Name, d digest.Digest, size int64) (*Prepared, error) {
	if err := CheckDirs(tools, name); err != nil {
		return nil, err
	}
	if err := tools.Budget.reserve(name, size); err != nil {
		return nil, err
	}
	st, err := makeStageDir(tools, name, d)
	if err != nil {
		tools.Budget.release(size)
		return nil, err
	}
	st.budget, st.reserved = tools.Budget, size
	return st, nil
}

// makeStageDir is openStageDir's folder.
func makeStageDir(tools Tools, name ref.Name, d digest.Digest) (*Prepared, error) {
	dir := StagedDir(tools, name)
	// A failed pull leaves no tools/: the folders made here go again unless it succeeds.
	h, err := openScope(tools, name)
	if err != nil {
		return nil, err
	}
	st := &Prepared{dir: dir, name: name, d: d, h: h}
	if st.tmpName, err = mkdirTempIn(h.scope, atomicfile.TempPrefix+name.Name+"-"); err != nil {
		h.close(true)
		return nil, errs.Wrap(err, errs.IO, "can't stage %s: %v", dir, err)
	}
	st.tmp = filepath.Join(filepath.Dir(dir), st.tmpName)
	if st.hold, err = holdIn(h.scope, st.tmpName); err == nil {
		st.files, err = h.scope.OpenRoot(st.tmpName)
	}
	if err != nil {
		st.Discard()
		return nil, errs.Wrap(err, errs.IO, "can't stage %s: %v", dir, err)
	}
	return st, nil
}

// fail discards the folder and words err as a staging failure.
func (st *Prepared) fail(err error) (*Prepared, error) {
	st.Discard()
	return nil, errs.Wrap(err, errs.TokenOf(err), "staging %s: %s", st.dir, errs.Message(err))
}

// complete adds murmur.yaml and the marker to a folder that holds the payload of a (size bytes,
// checksum crc), once the payload is the one the zip records: the staged file's checksum is what
// mur verify holds it to later.
func (st *Prepared) complete(a *artifact.Archive, size int64, crc uint32) error {
	m := stagedMarker{Digest: st.d.String(), Files: map[string]string{}, Sizes: map[string]int64{}}
	if err := payloadMatches(a, size, crcString(crc)); err != nil {
		return err
	}
	m.Files[a.PayloadName], m.Sizes[a.PayloadName] = crcString(crc), size
	yaml := crc32.NewIEEE()
	n, err := writeStaged(st.files, "murmur.yaml", bytes.NewReader(a.ManifestBytes), yaml, nil)
	if err != nil {
		return errs.Wrap(err, errs.IO, "%v", err)
	}
	m.Files["murmur.yaml"], m.Sizes["murmur.yaml"] = crcString(yaml.Sum32()), n
	m.Stamps = map[string]string{}
	for f := range m.Files {
		m.Stamps[f] = stampIn(st.files, f)
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := writeNew(st.files, stagedMarkerFile, append(mb, '\n')); err != nil {
		return errs.Wrap(err, errs.IO, "%v", err)
	}
	return nil
}

// discard removes a prepared folder that will not be installed; nil is nothing to discard.
func (st *Prepared) Discard() {
	if st != nil {
		st.closeTmp()
		st.h.close(true)
		st.budget.release(st.reserved)
		st.reserved = 0
	}
}

// install moves the prepared folder into place under the per-tool lock, unless another process
// staged the same blob meanwhile.
func (st *Prepared) Install() (string, error) {
	installed := false
	defer func() { st.h.close(!installed) }()
	defer st.closeTmp()
	scope := st.h.scope
	unlock, err := lockedfile.LockIn(context.Background(), scope, "."+st.name.Name+".lock")
	if err != nil {
		return "", errs.Wrap(err, errs.TokenOf(err), "can't lock %s for staging: %s", st.dir, errs.Message(err))
	}
	defer unlock()
	if isStaged(st.dir, st.d) {
		installed = true
		return st.dir, nil
	}
	if installHook != nil {
		installHook()
	}
	old := st.tmpName + ".old"
	if err := scope.Rename(st.name.Name, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", errs.Wrap(err, errs.IO, "can't replace %s: %v", st.dir, err)
	}
	if err := scope.Rename(st.tmpName, st.name.Name); err != nil {
		return "", errs.Wrap(err, errs.IO, "can't move staged files into %s: %v", st.dir, err)
	}
	installed = true
	st.reserved = 0 // staged: what it reserved stays taken
	scope.RemoveAll(old)
	// The rename is not fsynced either (see writeStaged): a crash may lose it, and the next
	// pull, finding no marker for the pinned digest, stages again.
	// The files went into the folder whose handle was held. If its path names another folder
	// now, someone moved it during the pull: the tool is not where the project looks for it.
	if err := st.h.still(); err != nil {
		return "", err
	}
	return st.dir, nil
}

// closeTmp releases the temporary folder, removing it if it is still there (install renamed it
// away otherwise).
func (st *Prepared) closeTmp() {
	if st.files != nil {
		st.files.Close()
	}
	if st.tmpName != "" {
		st.h.scope.RemoveAll(st.tmpName)
	}
	if st.hold != nil {
		st.hold.Close()
	}
}

// CheckStaged re-hashes tools/<scope>/<name>/ against its marker and the marker against want.
func CheckStaged(tools Tools, name ref.Name, want digest.Digest) error {
	if err := CheckDirs(tools, name); err != nil {
		return err
	}
	dir := StagedDir(tools, name)
	m, err := readMarker(dir)
	if err != nil {
		return errs.Wrap(err, errs.Integrity, "%s is not staged (%v); run 'mur verify --repair' or 'mur pull'", dir, err)
	}
	if m.Digest != want.String() {
		return errs.New(errs.Integrity, "%s was staged from %s, but murmur.lock pins %s; run 'mur verify --repair'", dir, m.Digest, want)
	}
	names := make([]string, 0, len(m.Files))
	for f := range m.Files {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if want := m.Stamps[f]; want != "" && stamp(filepath.Join(dir, f)) == want {
			continue
		}
		got, err := checksumFile(filepath.Join(dir, f))
		if err != nil {
			return errs.Wrap(err, errs.Integrity, "%s: %v; run 'mur verify --repair'", filepath.Join(dir, f), err)
		}
		if got != m.Files[f] {
			return errs.New(errs.Integrity, "%s has checksum %s, expected %s (staged from %s); run 'mur verify --repair'", filepath.Join(dir, f), got, m.Files[f], m.Digest)
		}
	}
	return nil
}

func readMarker(dir string) (stagedMarker, error) {
	var m stagedMarker
	b, err := os.ReadFile(filepath.Join(dir, stagedMarkerFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s is not valid JSON: %v", stagedMarkerFile, err)
	}
	return m, nil
}

func filesPresent(dir string, m stagedMarker) bool {
	for f := range m.Files {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil || fi.Size() != m.Sizes[f] {
			return false
		}
	}
	return len(m.Files) > 0
}

// checkStageDirs refuses tools/, tools/<scope>, tools/<scope>/<name> or the tool's stage lock
// when one is a symlink or not what it should be. A cloned repository can commit any of them as
// a symlink to a folder elsewhere, and staging renames and removes what it finds there, so mur
// would be renaming and removing outside the project.
func CheckDirs(tools Tools, name ref.Name) error {
	scopeDir := filepath.Join(tools.Dir(), name.Scope)
	for i, p := range []string{tools.Dir(), scopeDir, filepath.Join(scopeDir, "."+name.Name+".lock"), filepath.Join(scopeDir, name.Name)} {
		folder := i < 2 // staging makes these, and only moves the others aside
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if folder {
				return nil // nothing below a missing folder exists either
			}
		case err != nil:
			return errs.Wrap(err, errs.IO, "can't inspect %s: %v", p, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			return errs.New(errs.Denied, "%s is a symlink to %s, and mur stages tools only into real folders inside the project, so it changed nothing there; remove the symlink (its target is untouched) and run again", p, target)
		case folder && !fi.IsDir():
			return errs.New(errs.Denied, "%s is not a folder; move it away and run again", p)
		}
	}
	return nil
}
