package pull_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
)

// GITHUB_TOKEN goes to the API base and nowhere else: an attestations answer whose bundle_url
// points at another host gets no credential there, and the bundle that host serves (signed by a
// CA nobody trusts) fails a pull under require closed, leaving no blob, pin or tools/.
func TestProvenanceTokenStaysOnTheAPIBase(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	stranger := provenancetest.NewCA(t, "GitHub, Inc.")
	forged := stranger.Mint(t, provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
	var mu sync.Mutex
	var seen []http.Header
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		rw.Write(snappy.Encode(nil, forged))
	}))
	t.Cleanup(evil.Close)
	w.Fake.AddAttestationURL("acme", "murmur-artifacts", w.D.String(), evil.URL+"/attestations/1.json.sn")

	before := w.State()
	_, err := w.Pull(w.Puller(config.ProvenanceRequire), pulltest.Req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("err = %v, want provenance-unverifiable", err)
	}
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.ProvenanceUnverifiable)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the bundle_url was never fetched; the test proves nothing")
	}
	for _, h := range seen {
		for k, vs := range h {
			if strings.EqualFold(k, "Authorization") || strings.Contains(strings.Join(vs, " "), "t0ken") {
				t.Fatalf("the token reached the bundle_url's host in %s: %q", k, vs)
			}
		}
	}
}
