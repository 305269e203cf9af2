package state

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/suggest"
)

// Store is one state store on disk, as `mur state ls` lists it.
type Store struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"` // of its regular files
	Files int    `json:"files"`
}

// holdPath is the lock a run holds, shared, on its store for as long as it runs, and Remove
// takes exclusively. It sits beside the store, where no guest can reach it, and its leading dot
// keeps it out of every store name.
func holdPath(stateRoot, store string) string {
	return filepath.Join(stateRoot, "."+store+".lck")
}

// Hold marks store as in use by a run until release is called; Remove refuses it meanwhile. Runs
// share the hold, so two runs of one capsule may still use one store at once.
func Hold(ctx context.Context, stateRoot, store string) (release func(), err error) {
	if err := ValidateStoreName(store); err != nil {
		return nil, err
	}
	if err := ensurePrivateRealDir(stateRoot); err != nil {
		return nil, err
	}
	unlock, err := lockedfile.RLock(ctx, holdPath(stateRoot, store))
	if err != nil {
		if errs.TokenOf(err) == errs.Denied {
			return nil, err
		}
		return nil, errs.Wrap(err, errs.IO, "can't mark the state store %s as in use: %v", store, err)
	}
	return unlock, nil
}

// List returns the stores under stateRoot, by name; none when it does not exist yet.
func List(stateRoot string) ([]Store, error) {
	ents, err := os.ReadDir(stateRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't list the state stores in %s: %v", stateRoot, err)
	}
	var out []Store
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		s := Store{Name: e.Name(), Path: filepath.Join(stateRoot, e.Name())}
		// WalkDir never follows a symlink, so a link a guest made inside its store counts as
		// the link, not as what it points at.
		_ = filepath.WalkDir(s.Path, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					s.Bytes += fi.Size()
					s.Files++
				}
			}
			return nil
		})
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes store and everything in it, unless a run holds it: a guest would go on
// writing into a folder that is gone, and its next run would find none of it.
func Remove(stateRoot, store string) error {
	if err := ValidateStoreName(store); err != nil {
		return err
	}
	dir := filepath.Join(stateRoot, store)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return notFound(stateRoot, store)
	}
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't read the state store %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return errs.New(errs.Denied, "the state path %s is not a folder (a symlink or a file), and mur removes only its own stores; remove it by hand", dir)
	}
	// An ended context makes the lock a single try: a held store is refused, not waited for.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	unlock, err := lockedfile.Lock(ctx, holdPath(stateRoot, store))
	if errors.Is(err, context.Canceled) {
		return errs.New(errs.LockConflict, "the state store %s is in use by a running 'mur run'; stop the run, then remove it", store)
	}
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't lock the state store %s: %v", store, err)
	}
	defer unlock()
	if err := os.RemoveAll(dir); err != nil {
		return errs.Wrap(err, errs.IO, "can't remove the state store %s: %v; what is left is still there", dir, err)
	}
	_ = os.Remove(holdPath(stateRoot, store))
	return nil
}

func notFound(stateRoot, store string) error {
	stores, _ := List(stateRoot)
	names := make([]string, len(stores))
	for i, s := range stores {
		names[i] = s.Name
	}
	hint := "run 'mur state ls' for the stores there are"
	if near, ok := suggest.Nearest(store, names); ok {
		hint = "did you mean " + near + "?"
	}
	return errs.New(errs.NotFound, "there is no state store %s in %s; %s", store, stateRoot, hint)
}
