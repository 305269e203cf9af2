package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/internal/artifact"
)

// floorPull is the protocol's floor for a project pull, the third contender of the RTT row: one
// process that makes only the requests the job needs (a ping, then every manifest and every blob
// at once) and does only the work no client can skip (hash each blob, inflate its payload, write
// it out), with no lock, no provenance look-up, no fsync and no checks beyond the hash. It runs in
// the test process, so its CPU as reported includes the latency proxy's. When this floor is
// slower than a row's target, that target is past what the machine allows, whatever mur does.
func floorPull(b *testing.B, base string, repos []string, out string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(repos) * 2, DisableCompression: true}}
	defer client.CloseIdleConnections()
	get := func(path, accept string) []byte {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Errorf("GET %s: %d %v", path, resp.StatusCode, err)
			return nil
		}
		return body
	}
	get("/v2/", "")
	if err := os.MkdirAll(out, 0o755); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, repo := range repos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m struct {
				Layers []struct{ Digest string } `json:"layers"`
			}
			if err := json.Unmarshal(get("/v2/"+repo+"/manifests/1.0.0", "application/vnd.oci.image.manifest.v1+json"), &m); err != nil || len(m.Layers) != 1 {
				b.Errorf("%s: manifest: %v", repo, err)
				return
			}
			blob := get("/v2/"+repo+"/blobs/"+m.Layers[0].Digest, "")
			sum := sha256.Sum256(blob)
			if "sha256:"+hex.EncodeToString(sum[:]) != m.Layers[0].Digest {
				b.Errorf("%s: blob does not hash to %s", repo, m.Layers[0].Digest)
				return
			}
			a, err := artifact.Read(bytes.NewReader(blob), int64(len(blob)))
			if err != nil {
				b.Error(err)
				return
			}
			rc, err := a.OpenPayload()
			if err != nil {
				b.Error(err)
				return
			}
			defer rc.Close()
			f, err := os.Create(filepath.Join(out, fmt.Sprintf("%d.wasm", i)))
			if err != nil {
				b.Error(err)
				return
			}
			defer f.Close()
			if _, err := io.Copy(f, rc); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

// floorRepos turns the refs of the RTT row (host/repo:tag) into the repositories floorPull asks.
func floorRepos(refs []string) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		_, path, _ := strings.Cut(r, "/")
		out[i], _, _ = strings.Cut(path, ":")
	}
	return out
}
