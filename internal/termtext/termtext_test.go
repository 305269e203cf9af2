package termtext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// What a hostile server puts in an error body: OSC 52 (writes the clipboard), a screen clear,
// a carriage return that rewrites the line, a C1 CSI and DEL.
const hostile = "ok\x1b]52;c;aGFja2Vk\x07 \x1b[2J\rmur: fine \u009b31m\x7f\x00\tend"

func TestEscapeShowsEveryControl(t *testing.T) {
	t.Parallel()
	got := Escape(hostile + "\nline two")
	want := `ok\x1b]52;c;aGFja2Vk\x07 \x1b[2J\rmur: fine \u009b31m\x7f\x00` + "\tend\nline two"
	if got != want {
		t.Fatalf("Escape = %q\nwant      %q", got, want)
	}
	if got := Line("a\nb"); got != `a\nb` {
		t.Fatalf("Line = %q", got)
	}
	if got := Escape("caf\xe9 \xff"); got != `caf\xe9 \xff` {
		t.Fatalf("Escape of bytes that are not UTF-8 = %q", got)
	}
	for _, s := range []string{"plain text, ünïcödé, tab\there", "\ufffd is a real replacement"} {
		if got := Escape(s); got != s {
			t.Fatalf("Escape changed harmless text: %q -> %q", s, got)
		}
	}
}

func TestForeignCutsLongStrings(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2000)
	got := Foreign(long)
	if len(got) > MaxForeign+40 || !strings.HasSuffix(got, "… (cut: 3488 more bytes)") {
		t.Fatalf("Foreign kept %d bytes: ...%q", len(got), got[len(got)-40:])
	}
	if !strings.HasPrefix(got, strings.Repeat("é", 256)) {
		t.Fatal("Foreign cut inside a rune")
	}
	if Foreign("short") != "short" {
		t.Fatal("Foreign changed a short string")
	}
}

func TestWriterEscapesAStream(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := NewWriter(&b)
	// A rune split across two writes passes whole; the controls never do.
	w.Write([]byte("é"[:1]))
	w.Write([]byte("é"[1:] + hostile + "\n"))
	if bytes.ContainsAny(b.Bytes(), "\x1b\r\x07\x7f\x00") || strings.Contains(b.String(), "\u009b") {
		t.Fatalf("raw controls got through: %q", b.String())
	}
	if !strings.HasPrefix(b.String(), "é") || !strings.HasSuffix(b.String(), "\tend\n") {
		t.Fatalf("the Writer mangled text: %q", b.String())
	}
}

func TestJSONEscapesWhatEncodingJSONLeaves(t *testing.T) {
	t.Parallel()
	raw, _ := json.Marshal(map[string]string{"m": hostile})
	out := JSON(raw)
	if bytes.ContainsAny(out, "\x1b\r\x07\x7f\x00") || strings.Contains(string(out), "\u009b") {
		t.Fatalf("raw controls in JSON: %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["m"] != hostile {
		t.Fatalf("the JSON no longer means the same: %v, %q", err, back["m"])
	}
}

// The edges of what is escaped, one rune at a time so that no other rune in the string can make
// it escaped: the last C0 control and DEL and both ends of the C1 controls are shown as escapes,
// by Escape, Line, a Writer and JSON; the printable runes beside them pass as they are.
func TestEscapeEdgesOfTheControlRanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		r       rune
		visible string // "" when the rune is harmless and passes as it is
	}{
		{0x1f, `\x1f`},
		{' ', ""},
		{'~', ""},
		{0x7f, `\x7f`},
		{0x80, `\u0080`},
		{0x85, `\u0085`},
		{0x9b, `\u009b`},
		{0x9f, `\u009f`},
		{0xa0, ""},
		{'ÿ', ""},
	} {
		s := "a" + string(tt.r) + "b"
		want := s
		if tt.visible != "" {
			want = "a" + tt.visible + "b"
		}
		if got := Escape(s); got != want {
			t.Errorf("Escape(%q) = %q, want %q", s, got, want)
		}
		if got := Line(s); got != want {
			t.Errorf("Line(%q) = %q, want %q", s, got, want)
		}
		var b bytes.Buffer
		NewWriter(&b).Write([]byte(s))
		if b.String() != want {
			t.Errorf("a Writer wrote %q for %q, want %q", b.String(), s, want)
		}

		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON := string(raw)
		if tt.r == 0x7f || tt.r >= 0x80 && tt.r <= 0x9f {
			wantJSON = fmt.Sprintf(`"a\u%04xb"`, tt.r)
		}
		out := JSON(raw)
		if string(out) != wantJSON {
			t.Errorf("JSON(%q) = %q, want %q", raw, out, wantJSON)
		}
		var back string
		if err := json.Unmarshal(out, &back); err != nil || back != s {
			t.Errorf("JSON(%q) no longer means %q: %q, %v", raw, s, back, err)
		}
	}
}
