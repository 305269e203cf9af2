package e2e

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// TestScripts runs the command line's contract, cmd/mur/testdata/script/*.txtar, on the real
// binary: the examples of the README and docs/ (make demo and make ci-demo among them), and the errors and exit
// statuses users see. Each script gets a fresh $WORK, with MURMUR_HOME=$WORK/home.
func TestScripts(t *testing.T) {
	t.Parallel()
	bin := filepath.Dir(murBin)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "testdata", "script"),
		RequireExplicitExec: true,
		Cmds:                scriptCmds,
		Condition:           scriptCondition,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("MURMUR_HOME", filepath.Join(env.WorkDir, "home"))
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("NO_COLOR", "1")
			// For scripts that run the repository's own scripts (make demo) as users do.
			env.Setenv("REPO", repoRoot)
			env.Setenv("GOCACHE", goEnv("GOCACHE"))
			env.Setenv("GOMODCACHE", goEnv("GOMODCACHE"))
			env.Setenv("GOFLAGS", "-buildvcs=false")
			if v := os.Getenv(slowdown.Env); v != "" {
				env.Setenv(slowdown.Env, v)
			}
			return nil
		},
	})
}

var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// exitcode N prog args...: runs prog and requires exit status N exactly; its stdout and
	// stderr are there for the lines that follow.
	"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: exitcode N program [args...]")
		}
		want, err := strconv.Atoi(args[0])
		ts.Check(err)
		err = ts.Exec(args[1], args[2:]...)
		got := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			got = ee.ExitCode()
		case err != nil:
			ts.Fatalf("exec %s: %v", args[1], err)
		}
		if got != want {
			ts.Fatalf("%s exited %d, want %d", args[1], got, want)
		}
	},
	// registry VAR: starts Debian's docker-registry on a loopback port, sets $VAR to its
	// host:port, and stops it when the script ends.
	"registry": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: registry VAR")
		}
		r, err := registrytest.Launch(ts.MkAbs(".registry"))
		if err != nil {
			ts.Fatalf("the real OCI registry is unavailable: %v; install it with apt-get install docker-registry", err)
		}
		ts.Defer(r.Stop)
		registries.Store(r.Addr(), r)
		ts.Setenv(args[0], r.Addr())
	},
	// stopregistry VAR: stops the registry at $VAR before the script ends, to take the network away.
	"stopregistry": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: stopregistry VAR")
		}
		r, ok := registries.Load(ts.Getenv(args[0]))
		if !ok {
			ts.Fatalf("no registry at $%s", args[0])
		}
		r.(*registrytest.Registry).Stop()
	},
	// guest SRC OUT: builds the Go wasip1 guest in the repository folder SRC into OUT.
	"guest": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: guest SRC OUT")
		}
		src, err := filepath.Abs(filepath.Join("..", "..", "..", filepath.FromSlash(args[0])))
		ts.Check(err)
		built, err := guesttest.Cached(src)
		ts.Check(err)
		in, err := os.Open(built)
		ts.Check(err)
		defer in.Close()
		out := ts.MkAbs(args[1])
		ts.Check(os.MkdirAll(filepath.Dir(out), 0o755))
		f, err := os.Create(out)
		ts.Check(err)
		_, err = io.Copy(f, in)
		ts.Check(err)
		ts.Check(f.Close())
	},
}

// registries lets stopregistry find the registry a script started, by address.
var registries sync.Map

// repoRoot is the repository's root folder.
var repoRoot, _ = filepath.Abs(filepath.Join("..", "..", ".."))

// goEnv is `go env NAME`, so that scripts share the test's build caches.
func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
