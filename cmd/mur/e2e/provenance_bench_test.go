package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// provenanceBench is 20 artifacts of ~64 KiB released on the GitHub test server, each with a
// GitHub attestation served through bundle_url, and a project that declares them all.
func provenanceBench(b *testing.B) (*githubtest.Server, func(policy string) *world) {
	gh := githubtest.New(b)
	gh.AddRepo("acme", "murmur-artifacts", ownerID, repoID)
	ca := provenancetest.NewCA(b, "GitHub, Inc.")
	dir := b.TempDir()
	var arts []githubtest.Artifact
	var names []string
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("t%02d", i)
		data := readFile(b, artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(64<<10+i, uint64(64<<10+i))))
		arts = append(arts, githubtest.Artifact{Name: "acme/" + name, Version: "1.0.0", Release: "v1.0.0", Asset: name + "-1.0.0.mur.zip", Data: data})
		d := digest.FromBytes(data)
		gh.AddAttestation("acme", "murmur-artifacts", d.String(), ca.Mint(b, provenancetest.Statement(d.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf()), true)
		names = append(names, "acme/"+name+"@1.0.0")
	}
	gh.Publish("acme", "murmur-artifacts", "acme", arts...)
	roots := ca.TrustedRootJSON(b)
	return gh, func(policy string) *world {
		w := newWorld(b)
		w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
		w.write("murmur.yaml", sourceCapsule("sources", names...))
		w.writeHome("roots.json", string(roots))
		w.writeHome("config.yaml", "trusted_root: roots.json\nprovenance: "+policy+"\n")
		return w
	}
}

// BenchmarkProvenancePull20: a cold pull of the 20 with provenance required (20 attestation
// look-ups, one mur-provenance process verifying 20 bundles) against the same with provenance
// off, alternately.
func BenchmarkProvenancePull20(b *testing.B) {
	_, project := provenanceBench(b)
	var with, without *world
	interleaveOn(b, beside{served: "github"},
		contender{"provenance", func() { with = project("require") }, func(b *testing.B) { runTimed(b, with.cmd("pull", "-q", "--no-precompile")) }},
		contender{"off", func() { without = project("off") }, func(b *testing.B) { runTimed(b, without.cmd("pull", "-q", "--no-precompile")) }},
	)
	if e := with.lock().Find("acme/t00"); e == nil || e.Provenance == nil {
		b.Fatalf("the pull recorded no provenance:\n%s", with.lockBytes())
	}
}

// BenchmarkProvenanceWarm20: a warm locked pull of the 20 whose lock records verified
// provenance, against the same project pulled with provenance off, alternately, whole process.
// Neither may make a request: a recorded bundle is not fetched or verified again.
func BenchmarkProvenanceWarm20(b *testing.B) {
	gh, project := provenanceBench(b)
	with, without := project("require"), project("off")
	runTimed(b, with.cmd("pull", "-q", "--no-precompile"))
	runTimed(b, without.cmd("pull", "-q", "--no-precompile"))
	gh.ResetRequests()
	interleaveOn(b, beside{served: "github"},
		contender{"provenance", nil, func(b *testing.B) { runTimed(b, with.cmd("pull", "-q", "--no-precompile")) }},
		contender{"off", nil, func(b *testing.B) { runTimed(b, without.cmd("pull", "-q", "--no-precompile")) }},
	)
	b.ReportMetric(float64(len(gh.Requests())), "requests")
	if n := len(gh.Requests()); n != 0 {
		b.Fatalf("warm locked pulls made %d requests", n)
	}
}

// BenchmarkPackageInit measures what every mur command pays before main runs: the package
// initialisation that GODEBUG=inittrace=1 reports, summed, fastest of the runs. mur-provenance,
// which links sigstore-go (protobuf registries, TUF, x509 extensions), is the peer: it is what mur
// would pay if the verifier were linked in, and why it is a separate executable.
func BenchmarkPackageInit(b *testing.B) {
	provBin := filepath.Join(filepath.Dir(murBin), "mur-provenance")
	initOf := func(bin string, args ...string) (ms, kb float64) {
		ms = -1
		for i := 0; i < max(b.N, 8); i++ {
			c := exec.Command(bin, args...)
			c.Env = append(os.Environ(), "GODEBUG=inittrace=1")
			out, _ := c.CombinedOutput() // mur-provenance refuses arguments: its inits still ran
			var sumMS, sumBytes float64
			for _, l := range strings.Split(string(out), "\n") {
				// init internal/bytealg @0.007 ms, 0 ms clock, 0 bytes, 0 allocs
				f := strings.Fields(l)
				if len(f) < 9 || f[0] != "init" {
					continue
				}
				clock, _ := strconv.ParseFloat(f[4], 64)
				bytes, _ := strconv.ParseFloat(f[7], 64)
				sumMS += clock
				sumBytes += bytes
			}
			if sumMS == 0 {
				b.Fatalf("%s printed no init trace:\n%s", bin, out)
			}
			if ms < 0 || sumMS < ms {
				ms, kb = sumMS, sumBytes/1024
			}
		}
		return ms, kb
	}
	murMS, murKB := initOf(murBin, "version")
	provMS, provKB := initOf(provBin, "x")
	b.ReportMetric(murMS, "mur-init-ms")
	b.ReportMetric(murKB, "mur-init-KiB")
	b.ReportMetric(provMS, "sigstore-init-ms")
	b.ReportMetric(provKB, "sigstore-init-KiB")
}
