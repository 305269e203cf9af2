package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// Compiling a Go guest takes mur about a second of CPU, and was the end-to-end half's largest
// cost: some forty homes compiled the same two modules. A test that runs a guest for what it
// does, not for how mur compiles it, starts with the compiled module in its home (seedCompiled,
// or seedcompiled in a script), as a machine that has run the guest before has it. mur itself
// compiled the module, once per test binary, in a home of its own: the entry is the one the
// binary writes, under its wazero version. The tests of compiling (the progress of a pull,
// precompile, corruption, gc of compiled modules) compile for themselves.

func init() {
	// seedcompiled WASM HOME...: puts the compiled module of the guest in the file WASM into
	// each Murmur home HOME.
	scriptCmds["seedcompiled"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: seedcompiled WASM HOME...")
		}
		wasm, err := os.ReadFile(ts.MkAbs(args[0]))
		ts.Check(err)
		for _, home := range args[1:] {
			ts.Check(seedCompiledInto(ts.MkAbs(home), wasm))
		}
	}
}

// seedCompiled puts the multi-call Go guest's compiled module into w's home.
func (w *world) seedCompiled() {
	w.t.Helper()
	if err := seedCompiledInto(w.home, guesttest.Go(w.t)); err != nil {
		w.t.Fatal(err)
	}
}

// seedCompiledInto copies the compiled module of wasm into the Murmur home home.
func seedCompiledInto(home string, wasm []byte) error {
	src, err := compiledDir(wasm)
	if err != nil {
		return err
	}
	dst := filepath.Join(home, "compiled", filepath.Base(src))
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	// mur keeps its home and compiled cache private, and uses no cache folder that is not.
	for _, d := range []string{home, filepath.Dir(dst), dst} {
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// compiled holds, by the module's SHA-256, the wazero-* folder of a home where mur compiled it.
var compiled struct {
	mu   sync.Mutex
	dirs map[string]string
}

// compiledDir is the folder holding wasm's compiled module, which mur compiles on first use:
// pushed as an artifact to a layout and pulled, in a home of the test binary's scratch folder
// (TestMain removes it), which nothing else uses.
func compiledDir(wasm []byte) (string, error) {
	sum := sha256.Sum256(wasm)
	key := hex.EncodeToString(sum[:])
	compiled.mu.Lock()
	defer compiled.mu.Unlock()
	if d, ok := compiled.dirs[key]; ok {
		return d, nil
	}
	root, err := os.MkdirTemp(scratch, "compiled-")
	if err != nil {
		return "", err
	}
	zip := artifacttest.Zip("seed", "1.0.0", wasm)
	file := filepath.Join(root, artifact.FileName("seed", "1.0.0"))
	home, project, store := filepath.Join(root, "home"), filepath.Join(root, "project"), "oci-layout:"+filepath.Join(root, "store")
	if err := os.MkdirAll(project, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(file, zip, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(project, "murmur.yaml"), []byte(capsuleYAML("e2e/seed@1.0.0")), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{{"push", file, "--scope", "e2e", "--store", store}, {"pull", "--store", store}} {
		c := exec.Command(murBin, args...)
		c.Dir = project
		c.Env = []string{"MURMUR_HOME=" + home, "HOME=" + root, "PATH=" + os.Getenv("PATH"), "MUR_GITHUB_API_BASE=http://127.0.0.1:1"}
		if out, err := c.CombinedOutput(); err != nil {
			return "", fmt.Errorf("compiling a guest for the tests: mur %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(home, "compiled", "wazero-*"))
	if len(dirs) != 1 {
		return "", fmt.Errorf("the pull that compiles a guest for the tests left %v in its compiled cache, want one wazero-* folder", dirs)
	}
	if ents, _ := os.ReadDir(dirs[0]); len(ents) != 1 {
		return "", fmt.Errorf("the compiled cache of a guest for the tests holds %v, want its one entry", ents)
	}
	if compiled.dirs == nil {
		compiled.dirs = map[string]string{}
	}
	compiled.dirs[key] = dirs[0]
	return dirs[0], nil
}
