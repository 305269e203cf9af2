package pull

import (
	"context"
	"errors"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
)

// chainOf is a fetcher over the stores a and b, in that order, with the fallbacks given.
func chainOf(a, b fstore.Store, fallbacks map[string]fstore.Fallback) *fetcher {
	rv := &resolver{stores: []fstore.Store{a, b}, fallbacks: fallbacks, health: NewStoreHealth()}
	return &fetcher{resolve: rv, attest: &attestor{}}
}

func failing(addr string, tok errs.Token) *fakeStore {
	return &fakeStore{addr: addr, resolve: func(string, string) (fstore.Descriptor, error) {
		return fstore.Descriptor{}, errs.New(tok, "%s failed", addr)
	}}
}

// The chain stops at a store that says the lock is wrong, whatever its fallback: the next place
// is not asked, and the lock-conflict is the pull's error as it is.
func TestFetcherStopsOnLockConflict(t *testing.T) {
	a, b := failing("oci://a", errs.LockConflict), failing("oci://b", errs.NotFound)
	ft := chainOf(a, b, map[string]fstore.Fallback{"oci://a": fstore.FallbackAnyError})
	_, err := ft.fetch(context.Background(), Request{Name: grep, Version: "1.0.0", From: []string{FromStores}}, "1.0.0", pinned{}, nil)
	var ce *ChainError
	if errs.TokenOf(err) != errs.LockConflict || errors.As(err, &ce) {
		t.Fatalf("err = %v, want a store's lock-conflict, not a chain's failure", err)
	}
	if n := b.resolves.Load(); n != 0 {
		t.Errorf("the store after a lock-conflict was asked %d times", n)
	}
}

// A failure other than not-found stops the chain at a store whose fallback is not-found, and
// names it; with any-error it falls through to the next store.
func TestFetcherStopsOnFailureThatDoesNotFallThrough(t *testing.T) {
	ctx := context.Background()
	req := Request{Name: grep, Version: "1.0.0", From: manifest.DefaultFrom()}
	for _, c := range []struct {
		fallback   fstore.Fallback
		wantAskedB int32
		wantPlaces []string
	}{
		{fstore.FallbackNotFound, 0, []string{"oci://a"}},
		{fstore.FallbackAnyError, 1, []string{"oci://a", "oci://b"}},
	} {
		a, b := failing("oci://a", errs.Integrity), failing("oci://b", errs.NotFound)
		ft := chainOf(a, b, map[string]fstore.Fallback{"oci://a": c.fallback})
		_, err := ft.fetch(ctx, req, "1.0.0", pinned{}, nil)
		var ce *ChainError
		if !errors.As(err, &ce) {
			t.Fatalf("fallback %s: err = %v, want a ChainError", c.fallback, err)
		}
		var places []string
		for _, pl := range ce.Places {
			places = append(places, pl.Place)
		}
		if len(places) != len(c.wantPlaces) || places[0] != c.wantPlaces[0] || places[len(places)-1] != c.wantPlaces[len(c.wantPlaces)-1] {
			t.Errorf("fallback %s: places %v, want %v", c.fallback, places, c.wantPlaces)
		}
		if n := b.resolves.Load(); n != c.wantAskedB {
			t.Errorf("fallback %s: the next store was asked %d times, want %d", c.fallback, n, c.wantAskedB)
		}
		if errs.TokenOf(err) != errs.Integrity {
			t.Errorf("fallback %s: token %s, want the integrity failure of the store that answered", c.fallback, errs.TokenOf(err))
		}
	}
}

// checkDownload refuses bytes that are not the ones resolved, with the caller's words, and a
// payload whose packed murmur.yaml names another artifact or version, with the caller's token.
func TestCheckDownloadRefusals(t *testing.T) {
	ctx := context.Background()
	c, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	zip := artifacttest.Spec{Name: "grep", Version: "1.0.0"}.Zip()
	w, err := c.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(zip); err != nil {
		t.Fatal(err)
	}
	d, size := digest.FromBytes(zip), int64(len(zip))
	wrong := errors.New("the bytes are not the ones resolved")
	for _, k := range []struct {
		name    string
		digest  digest.Digest
		size    int64
		version string
		as      string
		want    error
		wantTok errs.Token
	}{
		{name: "another digest", digest: sha("other"), size: size, version: "1.0.0", want: wrong},
		{name: "another size", digest: d, size: size + 1, version: "1.0.0", want: wrong},
		{name: "another version", digest: d, size: size, version: "1.0.1", wantTok: errs.IndexMismatch},
		{name: "another name", digest: d, size: -1, version: "1.0.0", as: "sed", wantTok: errs.IndexMismatch},
		{name: "right, size unknown", digest: d, size: -1, version: "1.0.0"},
		{name: "right", digest: d, size: size, version: "1.0.0"},
	} {
		name := grep
		if k.as != "" {
			name.Name = k.as
		}
		desc := fstore.Descriptor{Name: name, Version: k.version, Digest: k.digest}
		a, err := checkDownload(w, name, desc, k.size, "oci://a", errs.IndexMismatch, func() error { return wrong })
		switch {
		case k.want != nil && !errors.Is(err, k.want), k.wantTok != "" && errs.TokenOf(err) != k.wantTok:
			t.Errorf("%s: err = %v", k.name, err)
		case k.want == nil && k.wantTok == "" && (err != nil || a == nil || a.Manifest.Name != "grep"):
			t.Errorf("%s: %v, %v; want the archive", k.name, a, err)
		}
	}
}
