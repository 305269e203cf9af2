package provenance

import (
	"fmt"
	"io"
	"os"

	"github.com/murmur-nexus/mur/internal/termtext"
)

// maxStderr bounds what of the helper's standard error reaches the user, per helper process:
// its own messages are a line or two, and a helper that writes without end must cost neither
// memory nor the terminal's scrollback.
const maxStderr = 64 << 10

// stderrSink passes the helper's standard error on, as text a terminal shows rather than obeys
// (termtext: an escape sequence in it could rewrite the screen or the clipboard), and only its
// first maxStderr bytes, with a line that says it was cut. It never fails a write: a helper whose
// standard error is not read would block on it, and so would its answers.
type stderrSink struct {
	w     *termtext.Writer
	under io.Writer
	left  int
}

func newStderrSink(w io.Writer) *stderrSink {
	if w == nil {
		w = os.Stderr
	}
	return &stderrSink{w: termtext.NewWriter(w), under: w, left: maxStderr}
}

func (s *stderrSink) Write(p []byte) (int, error) {
	n := len(p)
	if s.left == 0 {
		return n, nil
	}
	if len(p) >= s.left {
		s.w.Write(p[:s.left])
		s.left = 0
		fmt.Fprintf(s.under, "\n%s: its standard error is cut here, after %d bytes\n", HelperName, maxStderr)
		return n, nil
	}
	s.left -= len(p)
	s.w.Write(p)
	return n, nil
}
