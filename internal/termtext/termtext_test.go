package termtext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// What a hostile server puts in an error body: OSC 52 (writes the clipboard), a screen clear,
// a carriage return that rewrites the line, a C1 CSI and DEL.
const hostile = "ok\x1b]52;c;aGFja2Vk\x07 \x1b[2J\rmur: fine \u009b31m\x7f\x00\tend"

func TestEscapeShowsEveryControl(t *testing.T) {
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
