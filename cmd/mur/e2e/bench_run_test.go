package e2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// BenchmarkVerify re-hashes 32 blobs of 16 MiB, alternately: `mur verify` (every core, each
// blob read once for its hash and its zip's directory), a single-goroutine Go hash of the same files,
// and coreutils sha256sum.
func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	w := newWorld(b)
	store := "oci-layout:" + filepath.Join(dir, "store")
	var names []string
	const n, size = 32, 16 << 20
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("v%02d", i)
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(size, uint64(i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
		os.Remove(f)
		names = append(names, "bench/"+name+"@1.0.0")
	}
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML(names...))
	runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
	files, _ := filepath.Glob(filepath.Join(w.home, "cas", "blobs", "sha256", "*"))
	buf := make([]byte, 1<<20)
	interleave(b,
		contender{"mur", nil, func(b *testing.B) { runTimed(b, w.cmd("verify", "-q")) }},
		contender{"go-serial", nil, func(b *testing.B) {
			for _, f := range files {
				fh, err := os.Open(f)
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				io.CopyBuffer(h, fh, buf)
				fh.Close()
			}
		}},
		contender{"sha256sum", nil, func(b *testing.B) { runTimed(b, exec.Command("sha256sum", files...)) }},
	)
}

// BenchmarkRunHello runs the hello guest as a whole process: mur with a warm compiled cache
// beside a bare wazero program with a warm cache, and mur with a cold cache beside the bare
// program with an empty one and beside mur compiling with one worker.
func BenchmarkRunHello(b *testing.B) {
	dir := b.TempDir()
	w := newWorld(b)
	wasm := guesttest.Build(b, "hello")
	wasmPath := filepath.Join(dir, "hello.wasm")
	os.WriteFile(wasmPath, wasm, 0o644)
	f := artifacttest.File(b, dir, "hello", "1.0.0", wasm)
	store := "oci-layout:" + filepath.Join(dir, "store")
	runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("bench/hello@1.0.0"))
	runTimed(b, w.cmd("pull", "-q"))

	bare := benchTool(b, "barewazero")
	bareCache := filepath.Join(dir, "bare-cache")
	runTimed(b, exec.Command(bare, bareCache, wasmPath))

	dropCompiled := func() { os.RemoveAll(filepath.Join(w.home, "compiled")) }
	b.Run("warm", func(b *testing.B) {
		runTimed(b, w.cmd("run", "hello"))
		interleave(b,
			contender{"mur", nil, func(b *testing.B) { runTimed(b, w.cmd("run", "hello")) }},
			contender{"bare-wazero", nil, func(b *testing.B) { runTimed(b, exec.Command(bare, bareCache, wasmPath)) }},
		)
	})
	bareCold := filepath.Join(dir, "bare-cold-cache")
	b.Run("cold", func(b *testing.B) {
		interleave(b,
			contender{"mur", dropCompiled, func(b *testing.B) { runTimed(b, w.cmd("run", "hello")) }},
			// Bare wazero compiling the module into an empty cache, as mur's cold run does.
			contender{"bare-wazero", func() { os.RemoveAll(bareCold) }, func(b *testing.B) { runTimed(b, exec.Command(bare, bareCold, wasmPath)) }},
			contender{"mur-1-worker", dropCompiled, func(b *testing.B) {
				c := w.cmd("run", "hello")
				c.Env = append(c.Env, "MUR_COMPILE_WORKERS=1")
				runTimed(b, c)
			}},
		)
	})
}

// BenchmarkRunMemory is the peak RSS of `mur run`, a whole process, for a guest that grows to
// 1 GiB under a 2 GiB cap and for one that stays small under the default cap, beside the bare
// wazero program (wazero's own memory, which copies on every grow) running the same guest. Each
// reports the guest's own memory too: the target is mur's peak at most that plus 128 MiB.
func BenchmarkRunMemory(b *testing.B) {
	dir := b.TempDir()
	grow := guesttest.Build(b, "grow")
	growPath := filepath.Join(dir, "grow.wasm")
	os.WriteFile(growPath, grow, 0o644)
	bare := benchTool(b, "barewazero")
	bareCache := filepath.Join(dir, "bare-cache")
	for _, c := range []struct{ name, caps, mib string }{
		{"1GiB-of-2GiB-cap", "  limits: { memory_mib: 2048 }\n", "1024"},
		{"16MiB-default-cap", "", "16"},
	} {
		w := sandboxWorld(b, c.caps, map[string][]byte{"grow": grow})
		runTimed(b, w.cmd("pull", "-q"))
		runTimed(b, exec.Command(bare, bareCache, growPath, "0"))
		for _, peer := range []struct {
			name string
			cmd  func() *exec.Cmd
		}{
			{"mur", func() *exec.Cmd { return w.cmd("run", "grow", "--", c.mib) }},
			{"bare-wazero", func() *exec.Cmd { return exec.Command(bare, bareCache, growPath, c.mib) }},
		} {
			b.Run(peer.name+"-"+c.name, func(b *testing.B) {
				var rss, guest float64
				var cpu []time.Duration
				for i := 0; i < b.N; i++ {
					var out bytes.Buffer
					cmd := peer.cmd()
					cmd.Stdout = &out
					u := measure(b, cmd)
					rss, cpu = max(rss, u.maxRSS), append(cpu, u.cpu)
					m := guestMemory.FindStringSubmatch(out.String())
					if m == nil {
						b.Fatalf("grow %s: %s", c.mib, out.String())
					}
					g, _ := strconv.ParseFloat(m[1], 64)
					guest = max(guest, g)
				}
				b.ReportMetric(rss, "maxrss-MiB")
				b.ReportMetric(guest, "guest-MiB")
				b.ReportMetric(ms(median(cpu)), "cpu-ms")
			})
		}
	}
}
