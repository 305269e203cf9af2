package ocistore

import (
	"strings"
	"testing"
)

// A registry's error body is folded to one line, escaped and cut before it is quoted.
func TestServerBodyIsEscapedAndCut(t *testing.T) {
	got := oneLine("denied\r\n\x1b[2J\x1b]52;c;aGFja2Vk\x07 " + strings.Repeat("B", 5000))
	if strings.ContainsAny(got, "\x1b\x07\r\n") || !strings.Contains(got, `\x1b[2J`) {
		t.Fatalf("oneLine left controls raw: %q", got[:60])
	}
	if len(got) > 600 || !strings.Contains(got, "(cut: ") {
		t.Fatalf("oneLine kept %d bytes of a long body", len(got))
	}
}
