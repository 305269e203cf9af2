package sigstore

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
)

// endless reads as the letter a without end.
type endless struct{}

var letters = bytes.Repeat([]byte("a"), 64<<10)

func (endless) Read(p []byte) (int, error) { return copy(p, letters), nil }

// A request line longer than 64 MiB ends Serve with an error, unanswered, instead of being
// held whole however long it grows; mur, whose request went unanswered, fails closed. A request
// that carries the largest bundle mur sends is well within it, and answered.
func TestServeBoundsARequestLine(t *testing.T) {
	bundle := base64.StdEncoding.EncodeToString(make([]byte, provenance.MaxBundleSize))
	resps := serve(t, hello, `{"op":"verify","digest":"sha256:`+strings.Repeat("0", 64)+`","bundle":"`+bundle+`"}`)
	if resps[1].Token == "" || !strings.Contains(resps[1].Msg, "not a Sigstore bundle") {
		t.Fatalf("a request with a bundle of %d bytes: %+v", provenance.MaxBundleSize, resps[1])
	}

	var out strings.Builder
	in := io.MultiReader(strings.NewReader(hello+"\n"), io.LimitReader(endless{}, 64<<20+1), strings.NewReader("\n"+hello+"\n"))
	err := Serve(t.Context(), in, &out)
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("Serve of a line over 64 MiB: %v, want bufio.ErrTooLong", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Fatalf("Serve answered %d lines, want the first hello only:\n%.300s", n, out.String())
	}
}
