package ocistore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
)

// BenchmarkOpenRegistryBlob256MiB reads a 256 MiB blob from the real docker-registry on loopback,
// the way a cold pull does before hashing; compare with `crane blob` on the same registrytest.
func BenchmarkOpenRegistryBlob256MiB(b *testing.B) {
	r := registrytest.Start(b)
	s, err := ocistore.Open("oci://"+r.Addr()+"/murmur", ocistore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	const size = 256 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < size; i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	d := descFor(grep, "1.0.0", "any", data)
	if err := s.Push(context.Background(), d, bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	data = nil
	read := func(b *testing.B, open func() (io.ReadCloser, error), hash bool) {
		b.SetBytes(size)
		for i := 0; i < b.N; i++ {
			rc, err := open()
			if err != nil {
				b.Fatal(err)
			}
			var dst io.Writer = io.Discard
			if hash {
				dst = sha256.New()
			}
			n, err := io.Copy(dst, rc)
			rc.Close()
			if err != nil || n != size {
				b.Fatalf("read %d bytes: %v", n, err)
			}
		}
	}
	open := func() (io.ReadCloser, error) { return s.Open(context.Background(), grep, d.Digest) }
	b.Run("ocistore", func(b *testing.B) { read(b, open, false) })
	// What a pull does with the stream: hash it (the CAS ingest also writes it).
	b.Run("ocistore+sha256", func(b *testing.B) { read(b, open, true) })
	// What `crane blob` does: go-containerregistry's layer reader, which hashes to verify.
	b.Run("ggcr-layer", func(b *testing.B) {
		ref, err := name.NewDigest(r.Addr()+"/murmur/acme/grep@"+d.Digest.String(), name.Insecure)
		if err != nil {
			b.Fatal(err)
		}
		read(b, func() (io.ReadCloser, error) {
			l, err := remote.Layer(ref)
			if err != nil {
				return nil, err
			}
			return l.Compressed()
		}, false)
	})
}
