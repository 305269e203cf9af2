package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
)

// StagedMarker is the file in each tools/<scope>/<name>/ that says which blob it was staged
// from and what each staged file hashes to, so that `mur verify` can check it without the CAS.
const StagedMarker = ".mur-staged.json"

type stagedMarker struct {
	Digest string            `json:"digest"`
	Files  map[string]string `json:"files"` // file name → sha256 digest
}

// StagedDir is tools/<scope>/<name>/: the scoped name keeps two scopes' tools apart.
func StagedDir(proj Project, name ref.Name) string {
	return filepath.Join(proj.ToolsDir(), name.Scope, name.Name)
}

// Stage copies the packed murmur.yaml and the payload of blob d into tools/<scope>/<name>/.
// They are copies, never links to the CAS, so that editing them can't damage a blob. The folder
// is replaced whole: a reader sees the old set of files or the new one.
func Stage(proj Project, store *cas.Store, name ref.Name, d digest.Digest) (string, error) {
	dir := StagedDir(proj, name)
	if m, err := readMarker(dir); err == nil && m.Digest == d.String() && filesPresent(dir, m) {
		return dir, nil
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", errs.Wrap(err, errs.IO, "can't create %s: %v", parent, err)
	}
	unlock, err := lockedfile.Lock(context.Background(), filepath.Join(parent, "."+name.Name+".lock"))
	if err != nil {
		return "", errs.Wrap(err, errs.IO, "can't lock %s for staging: %v", dir, err)
	}
	defer unlock()
	// Another process may have staged it while this one waited.
	if m, err := readMarker(dir); err == nil && m.Digest == d.String() && filesPresent(dir, m) {
		return dir, nil
	}
	a, closer, err := artifact.Open(store.Path(d))
	if err != nil {
		return "", err
	}
	defer closer.Close()
	tmp, err := os.MkdirTemp(parent, atomicfile.TempPrefix+name.Name+"-")
	if err != nil {
		return "", errs.Wrap(err, errs.IO, "can't stage %s: %v", dir, err)
	}
	defer os.RemoveAll(tmp)
	m := stagedMarker{Digest: d.String(), Files: map[string]string{}}
	write := func(file string, r io.Reader) error {
		f, err := atomicfile.Create(tmp, filepath.Join(tmp, file), 0o644)
		if err != nil {
			return err
		}
		defer f.Abort()
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(f, h), r); err != nil {
			return err
		}
		m.Files[file] = digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)).String()
		return f.Commit()
	}
	if err := write("murmur.yaml", strings.NewReader(string(a.ManifestBytes))); err != nil {
		return "", errs.Wrap(err, errs.IO, "staging %s: %v", dir, err)
	}
	pr, err := a.OpenPayload()
	if err != nil {
		return "", err
	}
	err = write(a.PayloadName, pr)
	pr.Close()
	if err != nil {
		return "", errs.Wrap(err, errs.IO, "staging %s: %v", dir, err)
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(tmp, StagedMarker), append(mb, '\n'), 0o644); err != nil {
		return "", errs.Wrap(err, errs.IO, "staging %s: %v", dir, err)
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil && !os.IsNotExist(err) {
		return "", errs.Wrap(err, errs.IO, "can't replace %s: %v", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", errs.Wrap(err, errs.IO, "can't move staged files into %s: %v", dir, err)
	}
	os.RemoveAll(old)
	atomicfile.SyncDir(parent)
	return dir, nil
}

// CheckStaged re-hashes tools/<scope>/<name>/ against its marker and the marker against want.
func CheckStaged(proj Project, name ref.Name, want digest.Digest) error {
	dir := StagedDir(proj, name)
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
		got, err := hashFile(filepath.Join(dir, f))
		if err != nil {
			return errs.Wrap(err, errs.Integrity, "%s: %v; run 'mur verify --repair'", filepath.Join(dir, f), err)
		}
		if got != m.Files[f] {
			return errs.New(errs.Integrity, "%s hashes to %s, expected %s (staged from %s); run 'mur verify --repair'", filepath.Join(dir, f), got, m.Files[f], m.Digest)
		}
	}
	return nil
}

func readMarker(dir string) (stagedMarker, error) {
	var m stagedMarker
	b, err := os.ReadFile(filepath.Join(dir, StagedMarker))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s is not valid JSON: %v", StagedMarker, err)
	}
	return m, nil
}

func filesPresent(dir string, m stagedMarker) bool {
	for f := range m.Files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return len(m.Files) > 0
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)).String(), nil
}
