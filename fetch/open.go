package fetch

import (
	"time"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/store"
)

// Network is how one command reaches registries and GitHub.
type Network struct {
	// Timeout is how long a registry or GitHub may stay silent before a request gives up
	// (MUR_NETWORK_TIMEOUT); 0 means each client's default, DefaultTimeout.
	Timeout time.Duration
	// Registries is the file that remembers, across commands, which loopback registries speak
	// plain HTTP (ocistore.Schemes); "" remembers nothing.
	Registries string
}

// DefaultTimeout is how long a registry or GitHub may stay silent when Network.Timeout is 0.
const DefaultTimeout = ocistore.DefaultTimeout

// OpenStore opens the store at addr, oci://HOST[:PORT]/PREFIX or oci-layout:PATH, with a
// transport of its own: for the commands that write to one store (mur push, warm --layout).
// It makes no request and creates nothing.
func OpenStore(addr string, plainHTTP bool, n Network) (store.Store, error) {
	return ocistore.Open(addr, ocistore.Options{Timeout: n.Timeout, PlainHTTP: plainHTTP, Schemes: n.schemes()})
}

func (n Network) schemes() *ocistore.Schemes {
	if n.Registries == "" {
		return nil
	}
	return ocistore.NewSchemes(n.Registries)
}

// openers open what a Workspace's Puller talks to: the zero value opens through the Network
// (networkOpeners); tests hand their own (export_test.go).
type openers struct {
	// store opens a store address; plainHTTP lets a registry be spoken to without TLS.
	store func(addr string, plainHTTP bool) (store.Store, error)
	// mirror opens the mirror registry, which is written to; nil means store.
	mirror func(addr string, plainHTTP bool) (store.Store, error)
	// source is the source of every scope, labelled by sourceFor; nil asks no source.
	source func(sourceFor func(scope string) string) store.Source
}

// networkOpeners open through n: registries and layouts with ocistore, every scope's source on
// GitHub. The stores a pull reads share one authenticated transport per registry for the
// command; the mirror, which is written to, gets one of its own, not one a pull authenticated.
func networkOpeners(n Network) openers {
	pool, schemes := ocistore.NewPool(), n.schemes()
	open := func(pool *ocistore.Pool) func(string, bool) (store.Store, error) {
		return func(addr string, plainHTTP bool) (store.Store, error) {
			return ocistore.Open(addr, ocistore.Options{Timeout: n.Timeout, PlainHTTP: plainHTTP, Schemes: schemes, Pool: pool})
		}
	}
	return openers{
		store:  open(pool),
		mirror: open(nil),
		source: func(sourceFor func(string) string) store.Source {
			opt := github.ClientOptionsFromEnv()
			if n.Timeout > 0 {
				opt.Timeout = n.Timeout
			}
			return github.NewSource(github.NewClient(opt), sourceFor)
		},
	}
}
