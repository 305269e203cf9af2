package ocistore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// rangeStore is what fetch asks a registry store for: ranged reads of its blobs.
type rangeStore interface {
	Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (download.Ranger, error)
}

func ranger(t *testing.T, s store.Store, d store.Descriptor) download.Ranger {
	t.Helper()
	r, err := s.(rangeStore).Ranger(context.Background(), grep, d.Digest, d.Size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readPart(t *testing.T, p download.Part, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Body.Close()
	b, err := io.ReadAll(p.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The real registry answers closed ranges with 206 and its ETag; a whole GET is Whole.
func TestRangerOnDockerRegistry(t *testing.T) {
	reg := registrytest.Start(t)
	s := open(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	data := payload(100_000, 90)
	d := push(t, s, grep, "1.0.0", "any", data)
	r := ranger(t, s, d)
	p, err := r.Open(context.Background(), 1000, 1999, "")
	if p.Whole || p.Validator != `"`+d.Digest.String()+`"` {
		t.Fatalf("part %+v %v", p, err)
	}
	if got := readPart(t, p, err); string(got) != string(data[1000:2000]) {
		t.Fatal("bytes 1000-1999 differ")
	}
	p, err = r.Open(context.Background(), 0, -1, "")
	if !p.Whole {
		t.Fatalf("a whole GET: %+v", p)
	}
	if got := readPart(t, p, err); string(got) != string(data) {
		t.Fatal("the whole blob differs")
	}
	// If-Range with another ETag: the whole blob, as ServeContent answers.
	p, err = r.Open(context.Background(), 10, 19, `"sha256:other"`)
	if !p.Whole || len(readPart(t, p, err)) != len(data) {
		t.Fatalf("a stale If-Range: %+v", p)
	}
	// Past the end: refused, without reading distribution's misleading body.
	if _, err := r.Open(context.Background(), 200_000, 200_010, ""); !errors.Is(err, download.ErrNoRanges) || errs.TokenOf(err) != errs.Network {
		t.Fatalf("a range past the end: %v", err)
	}
}

// A 206 that is not the range asked for is never taken as a piece.
func TestRangerRefusesAnotherRange(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	data := payload(10_000, 91)
	d := push(t, s, grep, "1.0.0", "any", data)
	for name, fault := range map[string]func(w http.ResponseWriter, a, b int64){
		"shifted": func(w http.ResponseWriter, a, b int64) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a+1, b, len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[a+1 : b+1])
		},
		"other total": func(w http.ResponseWriter, a, b int64) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(data)+1))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[a : b+1])
		},
		"short": func(w http.ResponseWriter, a, b int64) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(data)))
			w.Header().Set("Content-Length", fmt.Sprint(b-a))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[a:b])
		},
	} {
		f.Arm(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			var a, b int64
			if !registrytest.IsBlob(r) || r.Header.Get("Range") == "" {
				next.ServeHTTP(w, r)
				return
			}
			fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b)
			fault(w, a, b)
		})
		_, err := ranger(t, s, d).Open(context.Background(), 100, 199, "")
		if !errors.Is(err, download.ErrNoRanges) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Weak ETags can't validate a range and are not offered as validators.
func TestRangerDropsWeakETags(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	d := push(t, s, grep, "1.0.0", "any", payload(1000, 92))
	for etag, want := range map[string]string{`W/"abc"`: "", `"abc"`: `"abc"`, `abc`: ""} {
		f.Arm(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			w.Header().Set("ETag", etag)
			next.ServeHTTP(w, r)
		})
		p, err := ranger(t, s, d).Open(context.Background(), 0, -1, "")
		readPart(t, p, err)
		if p.Validator != want {
			t.Errorf("ETag %s: validator %q, want %q", etag, p.Validator, want)
		}
	}
}

// A blob that is not there is not-found at the first Open.
func TestRangerNotFound(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	d := push(t, s, grep, "1.0.0", "any", payload(1000, 93))
	d.Digest = "sha256:" + "0000000000000000000000000000000000000000000000000000000000000000"
	if _, err := ranger(t, s, d).Open(context.Background(), 0, 9, ""); errs.TokenOf(err) != errs.NotFound {
		t.Fatalf("a missing blob: %v", err)
	}
}
