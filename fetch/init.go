package fetch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// `mur init` starts a project: the README's first project, written for the user. It never
// overwrites: a folder that already holds murmur.yaml, murmur.lock or .murmur/config.yaml is
// refused whole, before anything is written.

// InitOptions say what Init writes.
type InitOptions struct {
	// Name is the capsule's; "" takes the folder's name, made a valid one.
	Name string
	// Store goes into .murmur/config.yaml's stores; "" writes commented examples only. A
	// relative oci-layout: path is taken against WorkDir, and written relative to the project.
	Store   string
	WorkDir string
}

// InitReport is what Init wrote.
type InitReport struct {
	Dir       string   `json:"dir"`
	Name      string   `json:"name"`
	Created   []string `json:"created"`   // relative to Dir
	Store     string   `json:"store"`     // as config.yaml says it; "" for none
	Gitignore []string `json:"gitignore"` // the lines added to .gitignore
}

// gitignoreLines are what a project keeps out of git: the staged tools, the guests' workdir and
// the lock's lock file.
var gitignoreLines = []string{"tools/", "workdir/", ".murmur.lock.lck"}

// Init writes a new project into dir: murmur.yaml, .murmur/config.yaml and the .gitignore
// lines it lacks.
func Init(dir string, o InitOptions) (*InitReport, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't make %q absolute: %v", dir, err)
	}
	rep := &InitReport{Dir: dir, Name: o.Name, Created: []string{}, Gitignore: []string{}}
	if rep.Name == "" {
		rep.Name = nameFromFolder(filepath.Base(dir))
	} else if err := ref.ValidateSegment(rep.Name); err != nil {
		return nil, errs.New(errs.Usage, "--name %s; a capsule's name is a-z, 0-9 and '-', e.g. --name my-capsule", errs.Message(err))
	}
	var found []string
	for _, name := range []string{manifest.FileName, lock.FileName, config.ProjectFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			found = append(found, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, errs.Wrap(err, errs.IO, "can't check %s: %v", filepath.Join(dir, name), errs.OSCause(err))
		}
	}
	if len(found) > 0 {
		return nil, errs.New(errs.Usage, "%s already holds %s, and mur init never overwrites a project's files; edit them instead ('mur add REF' declares an artifact)", dir, strings.Join(found, " and "))
	}
	if o.Store != "" {
		if rep.Store, err = ProjectStore(o.Store, o.WorkDir, dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".murmur"), 0o755); err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't create %s: %v", filepath.Join(dir, ".murmur"), errs.OSCause(err))
	}
	cfg := filepath.Join(dir, config.ProjectFile)
	if err := atomicfile.WriteFile(cfg, []byte(configYAML(rep.Store)), 0o644); err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't write %s: %v", cfg, err)
	}
	mpath := filepath.Join(dir, manifest.FileName)
	if err := atomicfile.WriteFile(mpath, []byte(manifestYAML(rep.Name)), 0o644); err != nil {
		os.Remove(cfg) // all or nothing: a config.yaml alone would refuse the next mur init
		return nil, errs.Wrap(err, errs.IO, "can't write %s: %v", mpath, err)
	}
	rep.Created = append(rep.Created, manifest.FileName, config.ProjectFile)
	if rep.Gitignore, err = addGitignore(filepath.Join(dir, ".gitignore")); err != nil {
		return rep, err
	}
	return rep, nil
}

// notInName is what a folder's name may hold that a capsule's may not.
var notInName = regexp.MustCompile(`[^a-z0-9]+`)

// nameFromFolder makes a folder's name a capsule's: lower case, other characters as '-'.
func nameFromFolder(base string) string {
	name := strings.Trim(notInName.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if len(name) > 100 {
		name = strings.Trim(name[:100], "-")
	}
	if name == "" {
		return "my-capsule"
	}
	return name
}

// ProjectStore is addr, given on a command line in workDir, as the config.yaml of the project in
// dir writes it: checked, and an oci-layout: path relative to the project, since that is what
// config.yaml resolves it against.
func ProjectStore(addr, workDir, dir string) (string, error) {
	addr = store.CleanStoreAddress(addr)
	if err := store.ValidateStoreAddress(addr); err != nil {
		return "", err
	}
	abs, ok := strings.CutPrefix(store.ResolveStore(addr, workDir), store.SchemeOCILayout)
	if !ok {
		return addr, nil
	}
	if rel, err := filepath.Rel(dir, abs); err == nil {
		return store.SchemeOCILayout + filepath.ToSlash(rel), nil
	}
	return store.SchemeOCILayout + abs, nil
}

func manifestYAML(name string) string {
	return "name: " + name + `
version: "0.1.0"
# 'mur add SCOPE/NAME@VERSION' declares a tool here; 'mur pull' pins it in murmur.lock.
artifacts: []
capabilities:
  filesystem: { scope: "." }              # the guest sees workdir/ as /
  # state: {}                             # a durable state store named after the capsule
  # limits: { memory_mib: 128, timeout_s: 30 }
`
}

func configYAML(addr string) string {
	head := "# Where this project's artifacts come from (docs/config.md); a relative oci-layout: path is\n# taken from the project's folder.\n"
	examples := "  # - oci://registry.internal:5000/murmur\n  # - { url: \"oci://registry:5000/murmur\", plain_http: true }   # plain HTTP, by choice only\n"
	if addr == "" {
		return head + "# stores:\n#   - oci-layout:../store\n" + strings.ReplaceAll(examples, "  # -", "#   -")
	}
	return head + "stores:\n  - " + strconv.Quote(addr) + "\n" + examples
}

// addGitignore appends to path the lines of gitignoreLines it lacks, and returns them.
func addGitignore(path string) ([]string, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.IO, "can't read %s: %v", path, errs.OSCause(err))
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(old), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	added := []string{}
	text := string(old)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	for _, l := range gitignoreLines {
		if !have[l] {
			added = append(added, l)
			text += l + "\n"
		}
	}
	if len(added) == 0 {
		return added, nil
	}
	if err := atomicfile.WriteFile(path, []byte(text), 0o644); err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't write %s: %v", path, err)
	}
	return added, nil
}
