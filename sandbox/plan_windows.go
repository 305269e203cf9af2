package sandbox

import (
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A guest's file system is refused on Windows. rootFS confines a guest by walking every path
// one component at a time from folders it holds open, with openat, O_NOFOLLOW and readlinkat,
// and expanding symlinks itself only while they stay inside the workdir; Windows has no such
// calls for mur to build it on, and wazero's own mounts follow links out of the folder. So a plan
// is not even resolved there (BuildPlan, RunPlan), and only Run, with no file system, works.

// errNoSandboxFS is the refusal of anything that would mount a folder for a guest.
func errNoSandboxFS() error {
	return errs.New(errs.Denied, "mur can't run a guest with a file system on Windows: the sandbox keeps a guest inside its workdir by walking every path through folder descriptors that never follow a symlink (openat, O_NOFOLLOW), which Windows lacks, and mur won't mount a folder it can't confine; run mur on Linux or macOS (WSL works)")
}

func (l layout) resolve(create bool) (*opened, error) { return nil, errNoSandboxFS() }

func (p *Plan) open() (*rootFS, error) { return nil, errNoSandboxFS() }

// rootFS exists on Windows only so that the runner, which mounts one when it is given one, builds;
// none is ever made there.
type rootFS struct {
	experimentalsys.UnimplementedFS
}

func (*rootFS) Close() error { return nil }
