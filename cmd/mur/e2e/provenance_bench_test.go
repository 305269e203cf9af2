package e2e

import (
	"fmt"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/attest"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/provenance/provenancetest"
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
		gh.AddAttestation("acme", "murmur-artifacts", d.String(), ca.Mint(b, provenancetest.Statement(d.Encoded(), attest.SLSAProvenanceV1), provenancetest.GoodLeaf()), true)
		names = append(names, "acme/"+name+"@1.0.0")
	}
	gh.Publish("acme", "murmur-artifacts", "acme", arts...)
	roots := ca.TrustedRootJSON(b)
	return gh, func(policy string) *world {
		w := newWorld(b)
		w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
		w.write("murmur.yaml", sourceCapsule("sources", names...))
		w.write(".murmur/roots.json", string(roots))
		w.write(".murmur/config.yaml", "trusted_root: .murmur/roots.json\nprovenance: "+policy+"\n")
		return w
	}
}

// BenchmarkProvenancePull20: a cold pull of the 20 with provenance required (20 attestation
// look-ups, one mur-provenance process verifying 20 bundles) against the same with provenance
// off, alternately.
func BenchmarkProvenancePull20(b *testing.B) {
	_, project := provenanceBench(b)
	var with, without *world
	interleave(b,
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
	interleave(b,
		contender{"provenance", nil, func(b *testing.B) { runTimed(b, with.cmd("pull", "-q", "--no-precompile")) }},
		contender{"off", nil, func(b *testing.B) { runTimed(b, without.cmd("pull", "-q", "--no-precompile")) }},
	)
	b.ReportMetric(float64(len(gh.Requests())), "requests")
	if n := len(gh.Requests()); n != 0 {
		b.Fatalf("warm locked pulls made %d requests", n)
	}
}
