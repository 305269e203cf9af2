package artifact

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
)

func deflate(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := flate.NewWriter(&b, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, s)
	w.Close()
	return b.Bytes()
}

// A decompressor from the pool inflates each stream it is given from scratch, and stops at the
// stream's end: the bytes after it are still the reader's, which is how CheckStream and the
// streaming stage know where the next entry starts.
func TestPooledInflaterStartsAfreshAndStopsAtTheEnd(t *testing.T) {
	t.Parallel()
	payloads := []string{strings.Repeat("wasm ", 5000), "short", strings.Repeat("z", 70000)}
	for round := 0; round < 3; round++ {
		for _, p := range payloads {
			br, release := NewStreamReader(bytes.NewReader(append(deflate(t, p), "TRAILER"...)))
			fr := NewInflater(br)
			got, err := io.ReadAll(fr)
			if err != nil || string(got) != p {
				t.Fatalf("round %d: inflated %d bytes (%v), want the %d of the payload", round, len(got), err, len(p))
			}
			if err := fr.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fr.Close(); err != nil { // a second Close must not give it back twice
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != "TRAILER" {
				t.Fatalf("round %d: after the stream the reader holds %q, want the trailer", round, rest)
			}
			release()
		}
	}
}

// Closing twice gives the decompressor back once: two readers made afterwards never share one.
func TestPooledInflaterClosedTwiceIsPooledOnce(t *testing.T) {
	t.Parallel()
	fr := NewInflater(bytes.NewReader(deflate(t, "x")))
	io.ReadAll(fr)
	fr.Close()
	fr.Close()
	a, b := NewInflater(bytes.NewReader(nil)), NewInflater(bytes.NewReader(nil))
	if a.(*pooledInflater).ReadCloser == b.(*pooledInflater).ReadCloser {
		t.Fatal("two live readers share one decompressor")
	}
}
