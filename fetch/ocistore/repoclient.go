package ocistore

import (
	"context"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// client is the authenticated round tripper for repository r: the docker config's credentials
// for the registry, a ping, and a token for r when the registry asks for one. It is built per
// call; a blob's ranged reads share one.
func (s *registryStore) client(ctx context.Context, r name.Repository) (http.RoundTripper, error) {
	auth, err := s.keychain.Resolve(r)
	if err != nil {
		return nil, err // credentialKeychain names the file or helper
	}
	return transport.NewWithContext(ctx, r.Registry, auth, s.rt, []string{r.Scope(transport.PullScope)})
}
