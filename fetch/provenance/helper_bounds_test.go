//go:build unix

package provenance_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// terminalAttack is what a helper (or anything it links) might write to its standard error: an
// OSC 52 that sets the clipboard, a screen clear, a carriage return that rewrites the line, a C1
// CSI, and a byte that is not UTF-8.
const terminalAttack = "mur-provenance: \x1b]52;c;ZXZpbA==\x07 look\r\x1b[2Jfake line \u009b31m \xff\n"

// init makes the test binary, re-executed as mur-provenance in one of the modes below (see
// helper), a helper that pushes against a bound of the protocol. It runs before TestMain, which
// plays every other mode.
func init() {
	switch os.Getenv("ATTEST_TEST_HELPER") {
	default:
		return
	case "noisy": // a terminal attack and then 8 MiB on stderr, and then it serves
		os.Stderr.WriteString(terminalAttack)
		os.Stderr.Write(bytes.Repeat([]byte("noise "), 8<<20/6))
		if err := sigstore.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
	case "huge-answer": // the hello, and then an answer of 17 MiB on one line
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(nil, 64<<20)
		sc.Scan()
		os.Stdout.WriteString(`{"protocol":3,"version":"test"}` + "\n")
		sc.Scan()
		os.Stdout.WriteString(`{"msg":"` + strings.Repeat("a", 17<<20) + `"}` + "\n")
		sc.Scan()
	}
	os.Exit(0)
}

// syncBuffer is a bytes.Buffer that the helper's stderr copier may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The helper's standard error reaches the user as text: every control character shown as an
// escape, never obeyed, and only its first 64 KiB, with a line that says so. A helper that writes
// megabytes there is still read, so it never blocks, and its answers still come.
func TestHelperStderrIsEscapedAndBounded(t *testing.T) {
	var stderr syncBuffer
	h := helper(t, "noisy")
	h.Stderr = &stderr
	if _, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{}); err != nil {
		t.Fatalf("a helper that writes 8 MiB to stderr: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := stderr.String()
	for _, raw := range []string{"\x1b", "\x07", "\r", "\u009b", "\xff"} {
		if strings.Contains(got, raw) {
			t.Errorf("the helper's stderr reached the user with %q raw", raw)
		}
	}
	if want := `mur-provenance: \x1b]52;c;ZXZpbA==\x07 look\r\x1b[2Jfake line \u009b31m \xff` + "\n"; !strings.HasPrefix(got, want) {
		t.Errorf("the helper's stderr starts %q, want it escaped as %q", got[:min(len(got), 200)], want)
	}
	const cut = "mur-provenance: its standard error is cut here, after 65536 bytes\n"
	if !strings.HasSuffix(got, cut) || len(got) > 70<<10 {
		t.Errorf("the helper's stderr was passed on as %d bytes ending %q, want at most 64 KiB and a line saying it was cut", len(got), got[max(0, len(got)-100):])
	}
}

// An answer line longer than 16 MiB is refused as it is read, before it is held whole, and the
// verification fails closed.
func TestHelperRefusesAnOverlongAnswer(t *testing.T) {
	h := helper(t, "huge-answer")
	_, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{})
	errtest.WantToken(t, err, errs.ProvenanceUnverifiable, "it answered a line of more than 16777216 bytes", "nothing was accepted unverified")
}
