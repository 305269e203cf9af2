package pull

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// fakeStore answers Resolve with resolve and counts what it was asked; it holds no blob.
type fakeStore struct {
	addr     string
	resolve  func(version, platform string) (fstore.Descriptor, error)
	resolves atomic.Int32
}

func (s *fakeStore) String() string { return s.addr }

func (s *fakeStore) Resolve(_ context.Context, _ ref.Name, version, platform string) (fstore.Descriptor, error) {
	s.resolves.Add(1)
	return s.resolve(version, platform)
}

func (s *fakeStore) Open(context.Context, ref.Name, digest.Digest) (io.ReadCloser, error) {
	return nil, errs.New(errs.NotFound, "%s holds no blob", s.addr)
}

func (s *fakeStore) Push(context.Context, fstore.Descriptor, io.Reader) error {
	return errs.New(errs.Denied, "%s is read-only", s.addr)
}

// preparingStore is a fakeStore that readies itself for a pull, as a registry pings.
type preparingStore struct {
	*fakeStore
	prepareErr error
	prepares   atomic.Int32
}

func (s *preparingStore) Prepare(context.Context, []ref.Name) error {
	s.prepares.Add(1)
	return s.prepareErr
}

// fakeSource labels the scopes of labels and serves nothing.
type fakeSource struct{ labels map[string]string }

func (s fakeSource) Label(scope string) (string, bool) { l, ok := s.labels[scope]; return l, ok }

func (s fakeSource) Resolve(context.Context, ref.Name, string, string, *lock.ScopePin) (fstore.Sourced, error) {
	return fstore.Sourced{}, errs.New(errs.NotFound, "the source serves nothing")
}

func (s fakeSource) Fetch(context.Context, ref.Name, string, string, *lock.ScopePin, fstore.Scratch) (fstore.Sourced, error) {
	return fstore.Sourced{}, errs.New(errs.NotFound, "the source serves nothing")
}

var grep = ref.Name{Scope: "acme", Name: "grep"}

func sha(s string) digest.Digest { return digest.FromString(s) }

// A pin decides what a store's answer means: the pinned digest is what is fetched, and the tag is
// only asked for its size and to tell the lock that the tag moved.
func TestResolverResolveAtPins(t *testing.T) {
	const plat = "linux-x86_64"
	pinnedDesc := func() fstore.Descriptor {
		return fstore.Descriptor{Name: grep, Version: "1.0.0", Platform: plat, Digest: sha("pinned"), Size: -1, Origin: "oci://a"}
	}
	cases := []struct {
		name        string
		pin         pinned
		answer      fstore.Descriptor
		answerErr   error
		want        fstore.Descriptor
		wantMovedTo digest.Digest
		wantTok     errs.Token
	}{
		{name: "no pin takes the store's answer", answer: fstore.Descriptor{Digest: sha("tag"), Size: 7, Platform: plat},
			want: fstore.Descriptor{Digest: sha("tag"), Size: 7, Platform: plat, Origin: "oci://a"}},
		{name: "no pin keeps the store's failure", answerErr: errs.New(errs.NotFound, "no tag"), wantTok: errs.NotFound},
		{name: "pin, and the store can't be reached", pin: pinned{digest: sha("pinned"), platform: plat},
			answerErr: errs.New(errs.Network, "down"), wantTok: errs.Network},
		{name: "pin, and the tag names the pinned bytes", pin: pinned{digest: sha("pinned"), platform: plat},
			answer: fstore.Descriptor{Digest: sha("pinned"), Size: 7, Platform: ref.PlatformAny},
			want:   fstore.Descriptor{Digest: sha("pinned"), Size: 7, Platform: plat, Origin: "oci://a"}},
		{name: "pin, and the tag moved for the pinned platform", pin: pinned{digest: sha("pinned"), platform: plat},
			answer: fstore.Descriptor{Digest: sha("moved"), Size: 7, Platform: plat}, want: pinnedDesc(), wantMovedTo: sha("moved")},
		{name: "pin, and the tag serves another platform", pin: pinned{digest: sha("pinned"), platform: plat},
			answer: fstore.Descriptor{Digest: sha("other"), Size: 7, Platform: ref.PlatformAny}, want: pinnedDesc()},
		{name: "pin, and the tag is gone", pin: pinned{digest: sha("pinned"), platform: plat},
			answerErr: errs.New(errs.NotFound, "no tag"), want: pinnedDesc()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{addr: "oci://a", resolve: func(string, string) (fstore.Descriptor, error) { return c.answer, c.answerErr }}
			rv := &resolver{target: plat}
			desc, movedTo, err := rv.resolveAt(context.Background(), st, Request{Name: grep, Version: "1.0.0"}, "1.0.0", c.pin)
			if c.wantTok != "" {
				if errs.TokenOf(err) != c.wantTok {
					t.Fatalf("err = %v, want a %s", err, c.wantTok)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(desc, c.want) || movedTo != c.wantMovedTo {
				t.Fatalf("got %+v moved to %q, want %+v moved to %q", desc, movedTo, c.want, c.wantMovedTo)
			}
		})
	}
}

// The places are asked in install.from's order, every store in the configured order; a source
// is a place only when it serves the scope.
func TestResolverPlacesOrder(t *testing.T) {
	a, b := &fakeStore{addr: "oci://a"}, &fakeStore{addr: "oci://b"}
	src := fakeSource{labels: map[string]string{"acme": "github:acme/tools"}}
	labels := func(rv *resolver, scope string, from ...string) []string {
		var out []string
		for _, pl := range rv.places(Request{Name: ref.Name{Scope: scope, Name: "grep"}}, from) {
			out = append(out, pl.label)
		}
		return out
	}
	rv := &resolver{stores: []fstore.Store{a, b}, source: src}
	for _, c := range []struct {
		scope string
		from  []string
		want  []string
	}{
		{"acme", manifest.DefaultFrom(), []string{"oci://a", "oci://b", "github:acme/tools"}},
		{"acme", []string{FromSources, FromStores}, []string{"github:acme/tools", "oci://a", "oci://b"}},
		{"acme", []string{FromStores}, []string{"oci://a", "oci://b"}},
		{"other", []string{FromSources, FromStores}, []string{"oci://a", "oci://b"}}, // no source serves it
	} {
		if got := labels(rv, c.scope, c.from...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("places of %s from %v = %v, want %v", c.scope, c.from, got, c.want)
		}
	}
	if got := labels(&resolver{stores: []fstore.Store{a}}, "acme", FromSources, FromStores); !reflect.DeepEqual(got, []string{"oci://a"}) {
		t.Errorf("without a source, places = %v", got)
	}
}

// Not-found always falls through to the next place; any other failure only from a store whose
// fallback is any-error.
func TestResolverFallsThrough(t *testing.T) {
	strict, lenient := &fakeStore{addr: "oci://strict"}, &fakeStore{addr: "oci://lenient"}
	rv := &resolver{fallbacks: map[string]fstore.Fallback{"oci://lenient": fstore.FallbackAnyError}}
	notFound, network := errs.New(errs.NotFound, "missing"), errs.New(errs.Network, "down")
	for _, c := range []struct {
		st   fstore.Store
		err  error
		want bool
	}{
		{strict, notFound, true},
		{strict, network, false},
		{lenient, notFound, true},
		{lenient, network, true},
	} {
		if got := rv.fallsThrough(c.st, c.err); got != c.want {
			t.Errorf("fallsThrough(%s, %s) = %v, want %v", c.st, errs.TokenOf(c.err), got, c.want)
		}
	}
}

// The first resolve at a store readies it for the pull (Prepare) and, with its answer, tells
// the store's health: the next resolve asks nothing more of Prepare, and a store whose Prepare
// failed at the network is not asked again.
func TestResolverProbesHealthOnce(t *testing.T) {
	ctx := context.Background()
	req := Request{Name: grep, Version: "1.0.0"}
	answer := func(string, string) (fstore.Descriptor, error) {
		return fstore.Descriptor{Digest: sha("tag"), Size: 7}, nil
	}
	up := &preparingStore{fakeStore: &fakeStore{addr: "oci://up", resolve: answer}}
	down := &preparingStore{fakeStore: &fakeStore{addr: "oci://down", resolve: answer}, prepareErr: errs.New(errs.Network, "refused")}
	rv := &resolver{health: NewStoreHealth()}
	for range 2 {
		desc, _, err := rv.resolveStore(ctx, up, req, "1.0.0", pinned{})
		if err != nil {
			t.Fatal(err)
		}
		if desc.Platform != ref.PlatformAny {
			t.Errorf("a descriptor without a platform resolves as %q, want %q", desc.Platform, ref.PlatformAny)
		}
	}
	if n, r := up.prepares.Load(), up.resolves.Load(); n != 1 || r != 2 {
		t.Errorf("two resolves at a healthy store prepared it %d times and resolved %d, want 1 and 2", n, r)
	}
	for range 2 {
		if _, _, err := rv.resolveStore(ctx, down, req, "1.0.0", pinned{}); errs.TokenOf(err) != errs.Network {
			t.Fatalf("resolve at a store whose ping failed: %v, want a network error", err)
		}
	}
	if n, r := down.prepares.Load(), down.resolves.Load(); n != 1 || r != 0 {
		t.Errorf("a store whose ping failed was prepared %d times and resolved %d, want 1 and 0", n, r)
	}
	var fe *failedEarlier
	if _, _, err := rv.resolveStore(ctx, down, req, "1.0.0", pinned{}); !errors.As(err, &fe) {
		t.Errorf("the store down is refused with %v, want the failure that marked it", err)
	}
}
