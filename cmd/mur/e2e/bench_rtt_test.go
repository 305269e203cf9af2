package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// BenchmarkProjectRTT pulls a project cold through a proxy that puts a 20 ms round trip between
// the client and docker-registry (a registry in the same region; see proxytest.Options.RTT): 20
// artifacts of about 800 KB against 20 `oras pull` processes 4 at a time through the same proxy,
// and 100 artifacts alone. Every side is a child process, so the test process's CPU over a round
// is the proxy's, reported beside each side's own CPU and the registry's. The proxy's request log
// of each mur run says where its time goes: when the first request left, when the manifests and
// the blobs were all in, how many requests over how many connections, and how many round trips
// lie before the first blob byte and before the last blob request (roundTrips); each as the
// median over the rounds. mur-lock-writes counts the writes of murmur.lock (watchLock).
//
// 20-zstd is the same 20 packed with `mur pack --compression zstd`, whose payloads inflate in
// about a third of deflate's CPU. Beside both runs the floor (testdata/floorpull), the least any
// client can do for the same 20 through the same proxy: it says how far the machine lets a row's
// target reach.
func BenchmarkProjectRTT(b *testing.B) {
	b.Run("20", func(b *testing.B) { benchProjectRTT(b, 20, true, artifact.Deflate) })
	b.Run("20-zstd", func(b *testing.B) { benchProjectRTT(b, 20, true, artifact.Zstd) })
	b.Run("100", func(b *testing.B) { benchProjectRTT(b, 100, false, artifact.Deflate) })
}

func benchProjectRTT(b *testing.B, n int, withPeers bool, compression artifact.Compression) {
	reg := registrytest.Start(b)
	proxy := proxytest.Start(b, reg.Addr(), proxytest.Options{RTT: 20 * time.Millisecond})
	dir := b.TempDir()
	w := newWorld(b)
	wasm := guesttest.Build(b, "hello")
	var names, refs, files []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("r%03d", i)
		f := filepath.Join(dir, artifact.FileName(name, "1.0.0"))
		if err := os.WriteFile(f, artifacttest.Spec{Name: name, Version: "1.0.0", Wasm: wasm, Compression: compression}.Zip(), 0o644); err != nil {
			b.Fatal(err)
		}
		files = append(files, f)
		names = append(names, "bench/"+name+"@1.0.0")
		refs = append(refs, proxy.Addr()+"/murmur/bench/"+name+":1.0.0")
	}
	runTimed(b, w.cmd(append(append([]string{"push"}, files...), "--scope", "bench", "--store", "oci://"+reg.Addr()+"/murmur")...))
	for _, f := range files {
		os.Remove(f)
	}
	w.stores("oci://" + proxy.Addr() + "/murmur")
	w.write("murmur.yaml", capsuleYAML(names...))
	cold := func() {
		w.forget()
		proxy.ResetLog()
	}
	phases := map[string][]time.Duration{}
	cs := []contender{{"mur", cold, func(b *testing.B) {
		start := time.Now()
		lw := watchLock(b, w.project)
		runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
		if n := lw.writes(); n >= 0 {
			phases["lock-writes"] = append(phases["lock-writes"], time.Duration(n))
		}
		log := proxy.Log()
		for k, v := range timeline(log, start) {
			phases[k] = append(phases[k], v)
		}
		phases["requests"] = append(phases["requests"], time.Duration(len(log)))
		first, last := roundTrips(log, proxy.Options().RTT)
		phases["round-trips-first-blob"] = append(phases["round-trips-first-blob"], time.Duration(first))
		phases["round-trips-last-blob"] = append(phases["round-trips-last-blob"], time.Duration(last))
		phases["connections"] = append(phases["connections"], time.Duration(proxy.Connections()))
	}}}
	var pulls *orasPulls
	if withPeers {
		out := filepath.Join(dir, "oras")
		pulls = newOrasPulls(b, orasPath(b), refs, out, dir)
		cs = append(cs, contender{"oras", func() { os.RemoveAll(out) }, pulls.run})
		floor := benchTool(b, "floorpull")
		floorOut := filepath.Join(dir, "floor")
		cs = append(cs, contender{"floor", func() { os.RemoveAll(floorOut) }, func(b *testing.B) {
			runTimed(b, exec.Command(floor, append([]string{"http://" + proxy.Addr(), floorOut}, floorRepos(refs)...)...))
		}})
	}
	interleaveOn(b, beside{registry: reg.PID(), served: "proxy"}, cs...)
	if pulls != nil {
		pulls.reportCPU(b)
	}
	// Peak RSS from one more, untimed, pull.
	cold()
	b.ReportMetric(runPeak(b, w.cmd("pull", "-q", "--no-precompile")), "mur-maxrss-MiB")
	// The floor of the pull's own work: inflating every payload once, on one core, which its
	// check of each payload's CRC-32 (and staging into tools/) cannot do without.
	b.ReportMetric(ms(inflateAll(b, wasm, n, compression)), "inflate-one-core-ms")
	for k, v := range phases {
		med := median(v)
		if k == "requests" || k == "connections" || k == "lock-writes" || strings.HasPrefix(k, "round-trips") {
			b.ReportMetric(float64(med), "mur-"+k)
			continue
		}
		b.ReportMetric(ms(med), "mur-"+k+"-ms")
	}
}

// timeline reads a pull's request log: when, after start, its first request arrived, its ping
// and token were answered, and its last manifest, last provenance look-up and last blob were in.
func timeline(log []proxytest.Logged, start time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	last := func(k string, t time.Time) {
		if d := t.Sub(start); d > out[k] {
			out[k] = d
		}
	}
	for i, l := range log {
		if i == 0 {
			out["first-request"] = l.Start.Sub(start)
		}
		switch {
		case l.Path == "/v2/" || l.Path == "/v2":
			last("ping", l.End)
		case strings.Contains(l.Path, "/referrers/") || strings.Contains(l.Path, "/manifests/sha256-"):
			// The provenance look-ups: the referrers API, or its fallback tag.
			last("referrers", l.End)
		case strings.Contains(l.Path, "/manifests/"):
			last("manifests", l.End)
		case strings.Contains(l.Path, "/blobs/"):
			last("blobs", l.End)
		}
	}
	return out
}

// orasPulls is the peer of a project pull: one `oras pull` process per ref, each into its own
// folder under out, with HOME set to home so no user config is read. The rusage tool starts the
// pulls directly (no shell), 4 at a time, as `xargs -P4` would, so that the benchmark starts one
// process for this side as for the others, and reports their CPU without its own.
type orasPulls struct {
	tool, oras, list, report, home string
	cpu                            []time.Duration
}

func newOrasPulls(b *testing.B, oras string, refs []string, out, home string) *orasPulls {
	var lines strings.Builder
	for j, r := range refs {
		fmt.Fprintf(&lines, "%s %s\n", filepath.Join(out, strconv.Itoa(j)), r)
	}
	o := &orasPulls{tool: benchTool(b, "rusage"), oras: oras, list: filepath.Join(home, "oras-pulls.txt"), report: filepath.Join(home, "oras-pulls.json"), home: home}
	if err := os.WriteFile(o.list, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return o
}

// run is the side's round.
func (o *orasPulls) run(b *testing.B) {
	c := exec.Command(o.tool, "-jobs", "4", "-each", o.list, o.report, o.oras, "pull", "--plain-http", "--no-tty", "-o")
	c.Env = append(os.Environ(), "HOME="+o.home)
	runTimed(b, c)
	o.cpu = append(o.cpu, readUsage(b, o.report).cpu)
}

// reportCPU replaces the side's CPU as interleave reported it, which counts the tool's own, with
// the median of the oras processes' alone.
func (o *orasPulls) reportCPU(b *testing.B) { b.ReportMetric(ms(median(o.cpu)), "oras-cpu-ms") }

// inflateAll times inflating the payload of n artifacts packed from wasm, one after another in
// this process, as a pull's checks must.
func inflateAll(b *testing.B, wasm []byte, n int, compression artifact.Compression) time.Duration {
	zipped := artifacttest.Spec{Name: "inflate", Version: "1.0.0", Wasm: wasm, Compression: compression}.Zip()
	start := time.Now()
	for i := 0; i < n; i++ {
		a, err := artifact.Read(bytes.NewReader(zipped), int64(len(zipped)))
		if err != nil {
			b.Fatal(err)
		}
		rc, err := a.OpenPayload()
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	}
	return time.Since(start)
}
