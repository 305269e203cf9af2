package provenance_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/internal/errs"
)

// The test binary doubles as mur-provenance: re-executed with this variable set, it serves.
func TestMain(m *testing.M) {
	switch os.Getenv("ATTEST_TEST_HELPER") {
	case "serve":
		if err := sigstore.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "crash":
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func helper(t *testing.T, mode string) *provenance.Helper {
	t.Setenv("ATTEST_TEST_HELPER", mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &provenance.Helper{Path: exe}
	t.Cleanup(func() { h.Close() })
	return h
}

const (
	realSubject = digest.Digest("sha256:07e4b8c0e3580b3e4a1eb62c70f1ffb86004d3d94f50767cb404fa7a639b4d05")
)

func realBundle(t *testing.T) []byte {
	b, err := os.ReadFile("sigstore/testdata/github-attestation.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHelperVerifiesInItsOwnProcess(t *testing.T) {
	h := helper(t, "serve")
	want := provenance.Expect{Artifact: "malancas/demo@0.0.0", Scope: "malancas", OwnerID: 16248153, RepoID: 804070735}
	facts, err := h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{})
	if err != nil {
		t.Fatal(err)
	}
	if facts.OwnerID != 16248153 || facts.Repository != "malancas/attest-demo" {
		t.Fatalf("facts = %+v", facts)
	}
	// The error of a refused bundle keeps its token across the process boundary, and the
	// same helper answers the next request.
	want.OwnerID = 1
	_, err = h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{})
	if !errors.Is(err, errs.ProvenanceMismatch) || !strings.Contains(err.Error(), "murmur.lock pins owner 1,") {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{RootFile: "/nonexistent/root.json"}); !errors.Is(err, errs.InvalidConfig) {
		t.Fatalf("missing trusted_root: %v", err)
	}
}

func TestHelperFailsClosed(t *testing.T) {
	want := provenance.Expect{Artifact: "malancas/demo@0.0.0", OwnerID: 16248153, RepoID: 804070735}
	h := helper(t, "crash")
	for i := 0; i < 2; i++ {
		if _, err := h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{}); !errors.Is(err, errs.ProvenanceUnverifiable) {
			t.Fatalf("crashed helper, try %d: %v", i, err)
		}
	}
	missing := &provenance.Helper{Path: t.TempDir() + "/mur-provenance"}
	if _, err := missing.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{}); !errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("missing helper: %v", err)
	}
}
