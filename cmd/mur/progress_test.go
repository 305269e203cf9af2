package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
)

const mib = 1 << 20

// A resumed download's rate counts the bytes this pull moved, not the whole blob, and its lines
// say where it resumed; the summary counts the bytes that moved and says, apart, the ones
// resumed: the same count the note gave.
func TestProgressRateAfterResume(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	t0 := time.Unix(1000, 0)
	now := t0
	p := newProgress(&out, false, "pull")
	p.now = func() time.Time { return now }
	p.event(fetch.Event{Name: "acme/big", Phase: fetch.PhaseResolve})
	p.event(fetch.Event{Name: "acme/big", Phase: fetch.PhaseFetch, Bytes: 62 * mib, Total: 100 * mib, Resumed: 62 * mib, From: "oci://r/m"})
	now = t0.Add(2 * time.Second)
	p.event(fetch.Event{Name: "acme/big", Phase: fetch.PhaseFetch, Bytes: 81 * mib, Total: 100 * mib, Resumed: 62 * mib})
	l := p.by["acme/big"]
	if got := p.transferStatus(l, "downloading", 2*time.Second, 200); !strings.Contains(got, "81.0 MiB/100.0 MiB 9.5 MiB/s resuming at 62.0 MiB") {
		t.Errorf("status %q: want the rate over the 19 MiB moved and the resume point", got)
	}
	p.event(fetch.Event{Name: "acme/big", Phase: fetch.PhaseDone, Bytes: 100 * mib, Elapsed: 2 * time.Second, Resumed: 62 * mib, Moved: 38 * mib})
	p.finish(nil)
	for _, want := range []string{
		"acme/big: downloading from oci://r/m, resuming at 62.0 MiB\n",
		"acme/big: done 100.0 MiB in 2s (19.0 MiB/s, resumed at 62.0 MiB) from oci://r/m\n",
		"pull: 1 artifact: 1 fetched (38.0 MiB over the network, 62.0 MiB resumed) in ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log %q lacks %q", out.String(), want)
		}
	}
}

// A narrow terminal drops the bar first, then the verb and the resume note; the numbers stay.
func TestProgressNarrowKeepsTheNumbers(t *testing.T) {
	t.Parallel()
	p := newProgress(&bytes.Buffer{}, false, "pull")
	l := &artifactLine{name: "acme/big", phase: fetch.PhaseFetch, bytes: 70 * mib, total: 100 * mib, resumed: 62 * mib}
	for _, c := range []struct {
		room int
		want string
	}{
		{100, `^downloading \[=+ +\] 70.0 MiB/100.0 MiB 4.0 MiB/s resuming at 62.0 MiB$`},
		{64, `^downloading 70.0 MiB/100.0 MiB 4.0 MiB/s resuming at 62.0 MiB$`},
		{55, `^downloading 70.0 MiB/100.0 MiB 4.0 MiB/s$`},
		{29, `^70.0 MiB/100.0 MiB 4.0 MiB/s$`},
	} {
		got := p.transferStatus(l, "downloading", 2*time.Second, c.room)
		if !regexp.MustCompile(c.want).MatchString(got) || len(got) > c.room {
			t.Errorf("in %d columns: %q, want %s", c.room, got, c.want)
		}
	}
}

// The Ctrl-C message says how much of an interrupted download was kept for the next pull.
func TestProgressInterruptedSaysWhatWasKept(t *testing.T) {
	t.Parallel()
	p := newProgress(&bytes.Buffer{}, true, "pull")
	p.lines = []*artifactLine{
		{name: "acme/big", phase: fetch.PhaseFailed, kept: 62 * mib},
		{name: "acme/small", phase: fetch.PhaseDone},
	}
	want := "acme/big was stopped and changed nothing (62.0 MiB kept; run the pull again to resume); acme/small had finished and stays pinned"
	if got := p.interrupted(); got != want {
		t.Errorf("interrupted = %q, want %q", got, want)
	}
	p.lines = append(p.lines, &artifactLine{name: "acme/other", phase: fetch.PhaseFetch, kept: 0})
	if got := p.interrupted(); !strings.Contains(got, "acme/big, acme/other were stopped and changed nothing (62.0 MiB of acme/big kept; run the pull again to resume)") {
		t.Errorf("interrupted = %q", got)
	}
}

// hostileStore is a store address as a hostile index could send it: OSC 52 (writes the
// clipboard), a screen clear, a carriage return, a newline that starts a line of its own, DEL and
// two C1 controls (CSI and NEL).
const hostileStore = "oci://evil.example/m\x1b]52;c;aGFja2Vk\x07\x1b[2J\rmur: fine\nmur: done\x7f\u009b31m\u0085"

// Its escape, as the progress output must show it.
const hostileStoreShown = `oci://evil.example/m\x1b]52;c;aGFja2Vk\x07\x1b[2J\rmur: fine\nmur: done\x7f\u009b31m\u0085`

// rawControl finds a control character in what the progress wrote, other than the newlines
// ending its lines and, on a terminal, its own cursor moves (cursor up, \r and erase line).
func rawControl(t *testing.T, out string) string {
	t.Helper()
	out = regexp.MustCompile(`\x1b\[[0-9]+A|\r\x1b\[K`).ReplaceAllString(out, "")
	for _, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f) {
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// A store address (and a name) from outside reaches the progress output escaped, never raw: in
// a log's lines and on a terminal's redrawn ones, as it is fetched from and as it is done.
func TestProgressEscapesWhatCameFromOutside(t *testing.T) {
	t.Parallel()
	const name = "acme/x\x1b[2J\u009b"
	const nameShown = `acme/x\x1b[2J\u009b`
	for _, tt := range []struct {
		name string
		tty  bool
		want []string
	}{
		{"a log", false, []string{
			nameShown + ": downloading from " + hostileStoreShown + "\n",
			nameShown + ": done 1.0 MiB in 1s (1.0 MiB/s) from " + hostileStoreShown + "\n",
		}},
		{"a terminal", true, []string{nameShown + "  waiting", nameShown + "  done 1.0 MiB in 1s (1.0 MiB/s) from oci://evil"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := newProgress(&out, false, "pull")
			if tt.tty {
				// A file, so that the terminal's width falls back to 80 columns.
				f, err := os.Create(filepath.Join(t.TempDir(), "tty"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				p.fd = int(f.Fd())
			}
			t0 := time.Unix(1000, 0)
			p.now, p.started = func() time.Time { return t0 }, t0
			p.expect([]string{name})
			p.event(fetch.Event{Name: name, Phase: fetch.PhaseFetch, Total: mib, From: hostileStore})
			p.event(fetch.Event{Name: name, Phase: fetch.PhaseDone, Bytes: mib, Elapsed: time.Second, Moved: mib})
			p.finish(nil)
			if c := rawControl(t, out.String()); c != "" {
				t.Fatalf("a raw %s reached the progress output: %q", c, out.String())
			}
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the progress output %q lacks %q", out.String(), want)
				}
			}
		})
	}
}
