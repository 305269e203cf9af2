package pulltest

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

// GitHubSource is the GitHub source of every scope, asking fake.
func GitHubSource(fake *githubtest.Server) store.Source {
	return github.NewSource(github.NewClient(github.ClientOptions{BaseURL: fake.APIURL(), Token: "t0ken", Retries: 1, Timeout: slowdown.Scale(5 * time.Second)}), nil)
}

// FakeSource serves one packed artifact as a GitHub source would, with hooks.
type FakeSource struct {
	Source   string
	Owner    int64
	Zip      []byte
	Version  string
	Calls    atomic.Int64
	MidFetch func()
}

func (s *FakeSource) Label(scope string) (string, bool) { return s.Source, true }

func (s *FakeSource) sourced(name ref.Name, pin *lock.ScopePin) (store.Sourced, error) {
	s.Calls.Add(1)
	out := store.Sourced{
		Descriptor: store.Descriptor{Name: name, Version: s.Version, Platform: "any", Digest: digest.FromBytes(s.Zip), Size: int64(len(s.Zip)), Origin: s.Source},
		Release:    "v" + s.Version, Asset: name.Name + ".mur.zip", OwnerID: s.Owner, RepoID: 42,
	}
	if pin == nil {
		out.NewPin = &lock.ScopePin{Source: s.Source, OwnerID: s.Owner, RepoID: 42}
	} else if err := pin.CheckOwner(name.Scope, s.Source, s.Owner); err != nil {
		return store.Sourced{}, err
	}
	return out, nil
}

func (s *FakeSource) Resolve(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (store.Sourced, error) {
	return s.sourced(name, pin)
}

func (s *FakeSource) Fetch(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin, scratch store.Scratch) (store.Sourced, error) {
	out, err := s.sourced(name, pin)
	if err != nil {
		return out, err
	}
	scratch.Write(s.Zip)
	if s.MidFetch != nil {
		s.MidFetch()
	}
	return out, nil
}

// OpenCounter counts the payloads a store is asked to open.
type OpenCounter struct {
	store.Store
	Opens atomic.Int64
}

func (c *OpenCounter) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	c.Opens.Add(1)
	return c.Store.Open(ctx, n, d)
}
