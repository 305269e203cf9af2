package fetch_test

import (
	"context"
	"crypto/sha256"
	"hash"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// keyedCompiled is a compiled cache that holds the modules whose keys it was given, and remembers
// blob keys as a pull would.
type keyedCompiled struct {
	held       map[string]bool
	remembered map[digest.Digest][]byte
}

func (f *keyedCompiled) ModuleKey() hash.Hash        { return sha256.New() }
func (f *keyedCompiled) HasCompiled(key []byte) bool { return f.held[string(key)] }
func (f *keyedCompiled) BlobKey(d digest.Digest) ([]byte, bool) {
	k, ok := f.remembered[d]
	return k, ok
}
func (f *keyedCompiled) RememberBlobKey(d digest.Digest, key []byte) { f.remembered[d] = key }

// mur ls tells compiled from the compiled cache itself: a remembered key that names another
// module's compiled entry does not make a blob read as compiled, and is put right.
func TestListComputesCompiledFromThePayload(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 3)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	other := sha256.Sum256([]byte("another module"))
	fc := &keyedCompiled{held: map[string]bool{string(other[:]): true}, remembered: map[digest.Digest][]byte{p.Digest(): other[:]}}
	in := fetch.LocalInput{CAS: w.CAS, Project: w.Proj, Lock: w.ReadLock(), Compiled: fc}
	got, err := fetch.List(context.Background(), in)
	if err != nil || len(got) != 1 {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if got[0].Compiled {
		t.Fatalf("a wrong remembered key made %s read as compiled", ref.Name{Scope: "acme", Name: "grep"})
	}
	if string(fc.remembered[p.Digest()]) == string(other[:]) {
		t.Errorf("the wrong remembered key was kept")
	}
	// Once the payload's own module is compiled, it reads as compiled.
	fc.held[string(fc.remembered[p.Digest()])] = true
	if got, _ := fetch.List(context.Background(), in); !got[0].Compiled {
		t.Errorf("a compiled payload reads as not compiled")
	}
}
