package pull_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
)

// endlessRegistry knows no tag and answers every blob with an endless body, up to giveUp bytes.
type endlessRegistry struct {
	srv    *httptest.Server
	served atomic.Int64
}

const giveUp = 64 << 20 // a download that is not bounded ends here, and its test fails on the count

func startEndlessRegistry(t *testing.T) *endlessRegistry {
	e := &endlessRegistry{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet:
			buf := make([]byte, 64<<10)
			for e.served.Load() < giveUp {
				n, err := w.Write(buf)
				e.served.Add(int64(n))
				if err != nil {
					return
				}
			}
		case strings.Contains(r.URL.Path, "/manifests/") || strings.Contains(r.URL.Path, "/tags/"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// A pinned blob whose tag the store no longer knows is fetched by digest with no declared size:
// the artifact ceiling (plus the zip's overhead) bounds it, and an endless body fails the pull
// with integrity and leaves nothing behind.
func TestUndeclaredSizeIsBoundedByTheCeiling(t *testing.T) {
	const ceiling = 1 << 20
	pinned := pulltest.ZipOf("grep", "1.0.0", "pinned")
	t.Setenv(artifact.EnvMaxDecompressed, strconv.Itoa(ceiling))
	e := startEndlessRegistry(t)
	st := pulltest.OpenStore(t, "oci://"+strings.TrimPrefix(e.srv.URL, "http://")+"/murmur", ocistore.Options{})
	w := pulltest.NewWorld(t)
	w.PinAll([]pulltest.Pin{{Name: "acme/grep", Version: "1.0.0", Platform: "any", Blob: pinned}})
	before := w.State()
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	served := e.served.Load()
	t.Logf("%d bytes served, error %v", served, err)
	if errs.TokenOf(err) != errs.Integrity || !strings.Contains(err.Error(), artifact.EnvMaxDecompressed) {
		t.Fatalf("error %v, want integrity naming %s", err, artifact.EnvMaxDecompressed)
	}
	// Loopback socket buffers hold several MiB the client never reads.
	if bound := int64(ceiling + artifact.PackedOverhead); served >= giveUp/2 {
		t.Errorf("%d bytes served, want the download stopped soon after %d", served, bound)
	}
	w.AssertUnchanged(before)
}
