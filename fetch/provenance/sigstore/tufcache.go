package sigstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// An instance's folder, $MURMUR_HOME/trust/INSTANCE, holds one generation of what TUF delivered:
// a folder gen-* with the TUF metadata (tuf/) and the trusted_root.json they vouched for, which
// nothing changes once it is named. state.json names the generation in use. A refresh builds the
// next generation in a staging folder, makes it durable, renames it to a fresh gen-* name and
// then names it in state.json, one atomic rename; only then is the previous generation removed.
// A refresh killed at any point leaves state.json naming a whole generation, the previous one or
// the new, and the next refresh (under the lock) sweeps whatever no state.json names. A cache of
// a mur from before generations keeps tuf/ and trusted_root.json in the instance folder itself,
// which state.json then names as "".

// genPrefix starts the name of every generation folder.
const genPrefix = "gen-"

// cacheState is state.json in an instance's folder.
type cacheState struct {
	Repository string    `json:"repository"` // the cache holds this repository's root only
	Fetched    time.Time `json:"fetched,omitzero"`
	Attempted  time.Time `json:"attempted,omitzero"`
	Expires    time.Time `json:"expires,omitzero"` // of the TUF metadata that vouched for it
	// Current is the generation folder in use; "" is the instance folder itself (the layout
	// before generations).
	Current string `json:"current,omitempty"`
	// TimestampVersion is the version of the timestamp metadata of Current: no later refresh
	// takes an older one, even if the metadata it starts from was lost.
	TimestampVersion int64 `json:"timestamp_version,omitempty"`
}

// instanceCache is one instance's folder under RootsCache.Dir.
type instanceCache struct {
	src tufSource
	dir string
	// at, when set, is called at the named steps of a refresh: a test's seam that stops a
	// refresh there, as a kill would.
	at func(step string)
}

func (c instanceCache) mark(step string) {
	if c.at != nil {
		c.at(step)
	}
}

func (c instanceCache) state() cacheState {
	var st cacheState
	if data, err := safefile.ReadFile(filepath.Join(c.dir, "state.json"), maxStateFile); err == nil {
		json.Unmarshal(data, &st)
	}
	if st.Repository != c.src.url || !validGeneration(st.Current) {
		return cacheState{Repository: c.src.url}
	}
	return st
}

// validGeneration reports whether name may be a generation that state.json names: one folder of
// the instance's own, never a path elsewhere.
func validGeneration(name string) bool {
	return name == "" || (strings.HasPrefix(name, genPrefix) && filepath.Base(name) == name && !strings.ContainsAny(name, `/\`))
}

// saveState writes st durably: the one rename that moves a refresh's result into use.
func (c instanceCache) saveState(st cacheState) error {
	data, _ := json.Marshal(st)
	if err := atomicfile.WriteFile(filepath.Join(c.dir, "state.json"), data, 0o600); err != nil {
		return errs.Wrap(err, errs.IO, "can't record %s's trusted root cache in %s: %v", c.src.instance, c.dir, errs.OSCause(err))
	}
	return nil
}

// generation is the folder of st's generation, refused unless it is a real folder of the instance.
func (c instanceCache) generation(st cacheState) (string, error) {
	if st.Current == "" {
		return c.dir, nil
	}
	p := filepath.Join(c.dir, st.Current)
	return p, refuseLink(p)
}

// checkDir refuses a trust folder, or an instance folder in it, that is not a real folder: through
// a symlink mur would read its trusted roots from, and write them to, wherever the link points.
func (c instanceCache) checkDir() error {
	if err := refuseLink(filepath.Dir(c.dir)); err != nil {
		return err
	}
	return refuseLink(c.dir)
}

// refuseLink refuses d unless it is a real folder or nothing at all.
func refuseLink(d string) error {
	fi, err := os.Lstat(d)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return errs.Wrap(err, errs.IO, "can't read %s: %v", d, errs.OSCause(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(d)
		return errs.New(errs.Denied, "%s is a symlink to %s, and mur keeps the trusted roots it refreshes only in a folder of the Murmur home, never through a link; remove the symlink (its target is left untouched) and run 'mur trust refresh'", d, target)
	case !fi.IsDir():
		return errs.New(errs.Denied, "%s is not a folder, and mur keeps the trusted roots it refreshes there; move it aside and run 'mur trust refresh'", d)
	}
	return nil
}

// cached is the trusted root a refresh last verified for this repository, or nil. It reads
// without the lock, so a refresh in another process may replace the generation between reading
// state.json and reading the root: a root that went missing is looked for again where state.json
// now points.
func (c instanceCache) cached() []byte {
	if c.checkDir() != nil {
		return nil
	}
	for range 3 {
		st := c.state()
		if st.Fetched.IsZero() {
			return nil
		}
		gen, err := c.generation(st)
		if err == nil {
			var data []byte
			if data, err = safefile.ReadFile(filepath.Join(gen, targetName), maxRootFile); err == nil {
				if _, err := root.NewTrustedRootFromJSON(data); err != nil {
					return nil
				}
				return data
			}
		}
		if c.state().Current == st.Current {
			return nil
		}
	}
	return nil
}

// due reports whether a verify should try to refresh now.
func (st cacheState) due(now time.Time) bool {
	return st.Attempted.IsZero() || now.Sub(st.Attempted) >= refreshEvery ||
		(!st.Expires.IsZero() && now.After(st.Expires) && now.Sub(st.Attempted) >= expiredRetry)
}

// inUse is the trusted root an instance is checked against, and where it comes from.
func (c instanceCache) inUse() ([]byte, string) {
	if data := c.cached(); data != nil {
		return data, "cache"
	}
	return c.src.embedded, "embedded"
}

// sweep removes, under the lock, what no state.json names: a killed refresh's staging folder or
// unnamed generation, a generation a refresh replaced, and, once a generation is named, the files
// of the layout before generations.
func (c instanceCache) sweep(st cacheState) {
	ents, _ := os.ReadDir(c.dir)
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasPrefix(n, ".refresh-"), strings.HasPrefix(n, atomicfile.TempPrefix),
			strings.HasPrefix(n, genPrefix) && n != st.Current,
			st.Current != "" && (n == "tuf" || n == targetName):
			os.RemoveAll(filepath.Join(c.dir, n))
		}
	}
}

// commit makes stage, whose metadata TUF has just updated, the next generation, holding data:
// the trusted root is written beside the metadata, everything is made durable, and the folder
// takes a generation's name. Nothing names it yet: until state.json does, the previous
// generation stays in use, and a crash leaves this one to the next refresh's sweep.
func (c instanceCache) commit(stage string, data []byte) (string, error) {
	fail := func(err error) (string, error) {
		return "", errs.Wrap(err, errs.IO, "can't keep %s's trusted root in %s: %v", c.src.instance, c.dir, errs.OSCause(err))
	}
	if err := os.WriteFile(filepath.Join(stage, targetName), data, 0o600); err != nil {
		return fail(err)
	}
	if err := syncTree(stage); err != nil {
		return fail(err)
	}
	// The staging folder's random part names the generation, unless the generation in use
	// happens to have it (its own staging name was freed by its rename); the lock is held.
	name := genPrefix + strings.TrimPrefix(filepath.Base(stage), ".refresh-")
	for i := 2; ; i++ {
		if _, err := os.Lstat(filepath.Join(c.dir, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s%s-%d", genPrefix, strings.TrimPrefix(filepath.Base(stage), ".refresh-"), i)
	}
	if err := os.Rename(stage, filepath.Join(c.dir, name)); err != nil {
		return fail(err)
	}
	if err := atomicfile.SyncDir(c.dir); err != nil {
		return fail(err)
	}
	return name, nil
}

// syncTree fsyncs every file and folder under dir, so that a rename of dir that a power cut
// keeps finds them whole.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return atomicfile.SyncDir(p)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}
