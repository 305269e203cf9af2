package e2e

import (
	"crypto/sha512"
	"fmt"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
)

// The bundles a publisher holds before a release, made where the scripts can't: an attestation
// by a test CA of GitHub's shape, and a keyed bundle of a key file, as cosign sign-blob would.
func init() {
	scriptCmds["attest"] = cmdAttest
	scriptCmds["keysign"] = cmdKeySign
}

// scriptTB lets provenancetest, written for tests, report to the script that runs it.
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (s scriptTB) Helper()                           {}
func (s scriptTB) Fatal(args ...any)                 { s.ts.Fatalf("%s", fmt.Sprint(args...)) }
func (s scriptTB) Fatalf(format string, args ...any) { s.ts.Fatalf(format, args...) }

// attest ROOTS FILE OUT: mints a test CA of GitHub's instance, writes its trusted root to ROOTS
// (for trusted_root: in config.yaml) and to OUT an attestation of FILE by
// https://github.com/acme/murmur-tools (owner id 1234567, repository id 7654321), built by its
// release.yml workflow on a GitHub-hosted runner.
func cmdAttest(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: attest ROOTS FILE OUT")
	}
	tb := scriptTB{ts: ts}
	ca := provenancetest.NewCA(tb, "GitHub, Inc.")
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), ca.TrustedRootJSON(tb), 0o644))
	bundle := ca.Mint(tb, provenancetest.Statement(digest.FromBytes(data).Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
	ts.Check(os.WriteFile(ts.MkAbs(args[2]), bundle, 0o644))
}

// keysign KEY FILE OUT: writes to OUT the keyed bundle of FILE that KEY (a private key PEM)
// signs, the bundle mur push --sign-key attaches.
func cmdKeySign(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: keysign KEY FILE OUT")
	}
	key, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	sum := sha512.Sum512(data)
	bundle, _, err := sigstore.SignDigest(key, digest.FromBytes(data), sum[:])
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[2]), bundle, 0o644))
}
