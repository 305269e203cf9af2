// Package tuftest serves a TUF repository of the tests' own on loopback: root, targets, snapshot
// and timestamp metadata signed with fresh ed25519 keys, in consistent-snapshot layout, holding
// one target, trusted_root.json. Tests publish new versions of it, let metadata expire and
// tamper with what is served, as a real repository under attack would.
package tuftest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Target is the name of the one target the repository holds.
const Target = "trusted_root.json"

// Repo is a TUF repository served over HTTP on loopback.
type Repo struct {
	t    testing.TB
	dir  string
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]ed25519.PrivateKey

	root      *metadata.Metadata[metadata.RootType]
	targets   *metadata.Metadata[metadata.TargetsType]
	snapshot  *metadata.Metadata[metadata.SnapshotType]
	timestamp *metadata.Metadata[metadata.TimestampType]
	firstRoot []byte
	requests  int
	hang      bool
	published [][]byte // every timestamp.json served, oldest first
}

// New starts a repository whose target holds trustedRoot.
func New(t testing.TB, trustedRoot []byte) *Repo {
	t.Helper()
	r := &Repo{t: t, dir: t.TempDir(), keys: map[string]ed25519.PrivateKey{}}
	expires := time.Now().Add(7 * 24 * time.Hour).UTC().Truncate(time.Second)
	r.root = metadata.Root(expires)
	for _, role := range []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP} {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		r.keys[role] = priv
		key, err := metadata.KeyFromPublicKey(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.root.Signed.AddKey(key, role); err != nil {
			t.Fatal(err)
		}
	}
	r.firstRoot = r.write(r.root, metadata.ROOT, "1.root.json")
	r.write(r.root, metadata.ROOT, "root.json")
	r.targets = metadata.Targets(expires)
	r.targets.Signed.Version = 0
	r.snapshot = metadata.Snapshot(expires)
	r.snapshot.Signed.Version = 0
	r.timestamp = metadata.Timestamp(expires)
	r.timestamp.Signed.Version = 0
	r.Publish(trustedRoot)
	files := http.FileServer(http.Dir(r.dir))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		hang := r.hang
		r.mu.Unlock()
		if hang {
			<-req.Context().Done()
			return
		}
		files.ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// URL is the repository's base URL.
func (r *Repo) URL() string { return r.srv.URL }

// FirstRoot is version 1 of the root metadata: what a client trusts first.
func (r *Repo) FirstRoot() []byte { return r.firstRoot }

// Requests counts the requests served so far.
func (r *Repo) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Hang makes every request wait until its client gives up: a repository behind a black hole.
func (r *Repo) Hang() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hang = true
}

// RollBack serves the timestamp.json published before the last one again: a mirror replaying
// old, validly signed metadata to hide a newer root.
func (r *Repo) RollBack() {
	r.t.Helper()
	if len(r.published) < 2 {
		r.t.Fatal("tuftest: nothing to roll back to")
	}
	r.put("timestamp.json", r.published[len(r.published)-2])
}

// RollBackTo serves again the n-th timestamp.json Publish published, counting from 1: a
// mirror replaying metadata older than any a client has taken since.
func (r *Repo) RollBackTo(n int) {
	r.t.Helper()
	if n < 1 || n > len(r.published) {
		r.t.Fatalf("tuftest: no timestamp %d to roll back to (%d published)", n, len(r.published))
	}
	r.put("timestamp.json", r.published[n-1])
}

// Close stops serving: the repository is unreachable from then on.
func (r *Repo) Close() { r.srv.Close() }

// Publish makes trustedRoot the target, in new versions of targets, snapshot and timestamp.
func (r *Repo) Publish(trustedRoot []byte) {
	r.t.Helper()
	sum := sha256.Sum256(trustedRoot)
	if err := os.MkdirAll(filepath.Join(r.dir, "targets"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	r.put(filepath.Join("targets", hex.EncodeToString(sum[:])+"."+Target), trustedRoot)
	tf, err := metadata.TargetFile().FromBytes(Target, trustedRoot, "sha256")
	if err != nil {
		r.t.Fatal(err)
	}
	r.targets.Signed.Targets[Target] = tf
	r.targets.Signed.Version++
	r.write(r.targets, metadata.TARGETS, fmt.Sprintf("%d.targets.json", r.targets.Signed.Version))
	r.snapshot.Signed.Meta["targets.json"] = metadata.MetaFile(r.targets.Signed.Version)
	r.snapshot.Signed.Version++
	r.write(r.snapshot, metadata.SNAPSHOT, fmt.Sprintf("%d.snapshot.json", r.snapshot.Signed.Version))
	r.timestamp.Signed.Meta["snapshot.json"] = metadata.MetaFile(r.snapshot.Signed.Version)
	r.timestamp.Signed.Version++
	r.published = append(r.published, r.write(r.timestamp, metadata.TIMESTAMP, "timestamp.json"))
}

// ExpireTimestamp publishes a new timestamp version that expired an hour ago.
func (r *Repo) ExpireTimestamp() { r.ExpireTimestampAt(time.Now().Add(-time.Hour)) }

// ExpireTimestampAt publishes a new timestamp version that expires at when (to the second), and
// returns that time as the metadata says it.
func (r *Repo) ExpireTimestampAt(when time.Time) time.Time {
	r.timestamp.Signed.Expires = when.UTC().Truncate(time.Second)
	r.timestamp.Signed.Version++
	r.write(r.timestamp, metadata.TIMESTAMP, "timestamp.json")
	return r.timestamp.Signed.Expires
}

// ExpireSnapshot publishes new snapshot and timestamp versions, the snapshot expired an hour ago.
func (r *Repo) ExpireSnapshot() {
	r.snapshot.Signed.Expires = time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	r.snapshot.Signed.Version++
	r.write(r.snapshot, metadata.SNAPSHOT, fmt.Sprintf("%d.snapshot.json", r.snapshot.Signed.Version))
	r.timestamp.Signed.Meta["snapshot.json"] = metadata.MetaFile(r.snapshot.Signed.Version)
	r.timestamp.Signed.Version++
	r.write(r.timestamp, metadata.TIMESTAMP, "timestamp.json")
}

// Tamper publishes trustedRoot in the targets metadata but serves other bytes under its hash:
// what a compromised mirror that holds no key can do.
func (r *Repo) Tamper(trustedRoot, served []byte) {
	r.t.Helper()
	r.Publish(trustedRoot)
	sum := sha256.Sum256(trustedRoot)
	r.put(filepath.Join("targets", hex.EncodeToString(sum[:])+"."+Target), served)
}

type signable interface {
	Sign(signature.Signer) (*metadata.Signature, error)
	ClearSignatures()
	ToBytes(bool) ([]byte, error)
}

func (r *Repo) write(md signable, role, name string) []byte {
	r.t.Helper()
	signer, err := signature.LoadSigner(r.keys[role], crypto.Hash(0))
	if err != nil {
		r.t.Fatal(err)
	}
	md.ClearSignatures()
	if _, err := md.Sign(signer); err != nil {
		r.t.Fatal(err)
	}
	data, err := md.ToBytes(true)
	if err != nil {
		r.t.Fatal(err)
	}
	r.put(name, data)
	return data
}

func (r *Repo) put(name string, data []byte) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, name), data, 0o644); err != nil {
		r.t.Fatal(err)
	}
}
