// Package termtext is the one place that makes text safe to print on a terminal. Text that came
// from outside (a registry's error body, a GitHub message, an index, a packed manifest, a wasm
// module's names) may carry control sequences: OSC 52 writes the clipboard, ESC[2J clears the
// screen, a bare \r rewrites the line before it. Every such byte is shown as a visible escape
// instead, the way %q would show it, so that what a server sent is read, never obeyed.
//
// What is escaped: the C0 controls except tab (and newline, in Escape), DEL, the C1 controls
// (U+0080 to U+009F, which some terminals take as CSI and OSC), and bytes that are not UTF-8.
package termtext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxForeign is how many bytes of one foreign string Foreign keeps.
const MaxForeign = 512

// Escape returns s with every control character except tab and newline shown as a visible
// escape (\x1b, \r, \u009b), and every byte that is not UTF-8 as \xNN.
func Escape(s string) string { return escape(s, true) }

// Line is Escape that escapes newlines too: for one value that must stay on its line, so that
// a server can't start a line of its own that reads as mur's.
func Line(s string) string { return escape(s, false) }

// Foreign is Line cut to MaxForeign bytes with a note saying how much was left out: for any
// string that came from outside mur and is quoted in a message.
func Foreign(s string) string { return Cut(Line(s), MaxForeign) }

// Cut shortens s to at most max bytes, on a rune boundary, adding a note that says so.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return fmt.Sprintf("%s… (cut: %d more bytes)", s[:end], len(s)-end)
}

func unsafeRune(r rune, keepNewline bool) bool {
	switch {
	case r == '\t':
		return false
	case r == '\n':
		return !keepNewline
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	}
	return false
}

func escape(s string, keepNewline bool) string {
	clean := true
	for i, r := range s {
		if unsafeRune(r, keepNewline) || (r == utf8.RuneError && !isRealReplacement(s, i)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r, keepNewline):
			b.WriteString(visible(r))
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func isRealReplacement(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 3
}

func visible(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// Writer escapes everything written through it (see Escape), for a stream that only ever
// carries text meant for a person: every error, warning, progress line and table of mur goes
// through one. A rune split across two writes is held back until its end arrives.
type Writer struct {
	w     io.Writer
	carry []byte
}

// NewWriter returns a Writer onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Unwrap is the stream beneath, for a caller that writes its own control sequences (a
// progress display's cursor moves) around text it escaped itself.
func (w *Writer) Unwrap() io.Writer { return w.w }

func (w *Writer) Write(p []byte) (int, error) {
	buf := append(w.carry, p...)
	w.carry = nil
	// Hold back an incomplete rune at the end, up to 3 bytes, for the next write.
	tail := 0
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-3; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				tail = len(buf) - i
			}
			break
		}
	}
	if tail > 0 {
		w.carry = append([]byte(nil), buf[len(buf)-tail:]...)
		buf = buf[:len(buf)-tail]
	}
	if _, err := io.WriteString(w.w, Escape(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// JSON makes encoding/json's output safe for a terminal as well: encoding/json escapes the C0
// controls but leaves DEL and the C1 controls raw, and in JSON they can only sit inside strings,
// where \u007f and \u0085 mean the same.
func JSON(b []byte) []byte {
	s := string(b)
	clean := true
	for _, r := range s {
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	var out strings.Builder
	for _, r := range s {
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}
