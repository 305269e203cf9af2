package sigstore

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// serve runs Serve over the given request lines and returns its answers, one per line.
func serve(t *testing.T, lines ...string) []provenance.Response {
	t.Helper()
	var out strings.Builder
	if err := Serve(t.Context(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	var resps []provenance.Response
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var r provenance.Response
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("answer %q: %v", sc.Text(), err)
		}
		resps = append(resps, r)
	}
	if len(resps) != len(lines) {
		t.Fatalf("%d answers to %d requests:\n%s", len(resps), len(lines), out.String())
	}
	return resps
}

var (
	hello     = `{"op":"hello","protocol":3}`
	badDigest = `{"op":"verify","digest":"nope","bundle":"e30="}`
)

// Nothing is checked before mur and the helper agree on the protocol: an older mur, which sends
// no hello, hears which versions disagree instead of having its bundle checked.
func TestServeAgreesOnTheProtocolFirst(t *testing.T) {
	r := serve(t, badDigest, `{"op":"hello","protocol":4}`, badDigest, hello, badDigest)
	errtest.WantToken(t, r[0].Err(), errs.ProvenanceUnverifiable, "expected protocol 3, found none", "go install github.com/murmur-nexus/mur/cmd/...", "make build")
	if r[1].Protocol != provenance.Protocol || r[1].Version == "" || r[1].Err() != nil {
		t.Fatalf("hello of another protocol: %+v, want this helper's protocol and version", r[1])
	}
	errtest.WantToken(t, r[2].Err(), errs.ProvenanceUnverifiable, "expected protocol 3, found none")
	if r[3].Protocol != provenance.Protocol || r[3].Err() != nil {
		t.Fatalf("hello: %+v", r[3])
	}
	// Agreed, the request is checked: the digest is refused on its own merits.
	errtest.WantToken(t, r[4].Err(), errs.Internal, "not a sha256 digest")
}

// A hello of another shape is still answered with the protocol, so that the mur that sent it
// can say which versions disagree; it agrees on nothing.
func TestServeAnswersAnyHello(t *testing.T) {
	r := serve(t, `{"op":"hello","protocol":3,"features":["x"]}`, badDigest)
	if r[0].Protocol != provenance.Protocol {
		t.Fatalf("hello with an unknown field: %+v", r[0])
	}
	errtest.WantToken(t, r[1].Err(), errs.ProvenanceUnverifiable, "found none")
}

// A field the helper does not know is refused, not dropped: it may be a policy that the mur
// which sent it meant to enforce.
func TestServeRefusesUnknownFields(t *testing.T) {
	sign, _ := json.Marshal(provenance.Request{Op: "sign", Digest: "nope", Key: ecdsaPEM(t)})
	r := serve(t, hello,
		`{"op":"verify","digest":"sha256:`+zipDigest.Encoded()+`","bundle":"e30=","expect":{"artifact":"acme/grep@1.2.0","require_tag":"v1"}}`,
		`{"op":"verify","digest":"sha256:`+zipDigest.Encoded()+`","bundle":"e30=","trust":{"trusted_root_sha256":"ab"}}`,
		`{"op":"verify","digest":"sha256:`+zipDigest.Encoded()+`","bundle":"e30=","policy":"strict"}`,
		`{"op":"verify"} {"op":"sign"}`,
		`{"op":"frobnicate","digest":""}`,
		string(sign),
	)
	for i, field := range []string{"require_tag", "trusted_root_sha256", "policy"} {
		errtest.WantToken(t, r[i+1].Err(), errs.ProvenanceUnverifiable, "can't read mur's request", field)
	}
	errtest.WantToken(t, r[4].Err(), errs.ProvenanceUnverifiable, "more than one JSON value")
	errtest.WantToken(t, r[5].Err(), errs.Internal, `unknown op "frobnicate"`)
	// A digest without a ':' is refused, not a panic of go-digest that ends the helper.
	errtest.WantToken(t, r[6].Err(), errs.Internal, `"nope" is not a sha256 digest`)
}
