// floorpull is the protocol's floor for a project pull, a contender of the RTT row: one process
// that makes only the requests the job needs (a ping, then every manifest and every blob at once)
// and does only the work no client can skip (hash each blob, inflate its payload, write it out),
// with no lock, no provenance look-up, no fsync and no check beyond the hash. It runs as its own
// process, as mur and oras do, so that its CPU is its own and the test process's is the latency
// proxy's. When this floor is slower than a row's target, that target is past what the machine
// allows, whatever mur does.
//
// Usage: floorpull BASE-URL OUT-DIR REPO...; each REPO's tag 1.0.0 is pulled into OUT-DIR/<i>.wasm.
package main

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
	"sync"

	"github.com/murmur-nexus/mur/internal/artifact"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: floorpull BASE-URL OUT-DIR REPO...")
		os.Exit(2)
	}
	base, out, repos := os.Args[1], os.Args[2], os.Args[3:]
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(repos) * 2, DisableCompression: true}}
	if _, err := get(client, base+"/v2/", ""); err != nil {
		fail(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fail(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(repos))
	for i, repo := range repos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pull(client, base, repo, filepath.Join(out, fmt.Sprintf("%d.wasm", i)))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "floorpull:", err)
	os.Exit(1)
}

func get(client *http.Client, url, accept string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, err
}

// pull fetches repo's manifest and its one layer, checks the layer's hash and writes its payload.
func pull(client *http.Client, base, repo, dst string) error {
	raw, err := get(client, base+"/v2/"+repo+"/manifests/1.0.0", "application/vnd.oci.image.manifest.v1+json")
	if err != nil {
		return err
	}
	var m struct {
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || len(m.Layers) != 1 {
		return fmt.Errorf("%s: manifest with %d layers: %v", repo, len(m.Layers), err)
	}
	blob, err := get(client, base+"/v2/"+repo+"/blobs/"+m.Layers[0].Digest, "")
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(blob); "sha256:"+hex.EncodeToString(sum[:]) != m.Layers[0].Digest {
		return fmt.Errorf("%s: blob does not hash to %s", repo, m.Layers[0].Digest)
	}
	a, err := artifact.Read(bytes.NewReader(blob), int64(len(blob)))
	if err != nil {
		return err
	}
	rc, err := a.OpenPayload()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, rc)
	return err
}
