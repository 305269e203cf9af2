package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
)

const mib = 1 << 20

// A resumed download's rate counts the bytes this pull moved, not the whole blob, and its lines
// say where it resumed.
func TestProgressRateAfterResume(t *testing.T) {
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
	p.event(fetch.Event{Name: "acme/big", Phase: fetch.PhaseDone, Bytes: 100 * mib, Elapsed: 2 * time.Second})
	for _, want := range []string{
		"acme/big: downloading from oci://r/m, resuming at 62.0 MiB\n",
		"acme/big: done 100.0 MiB in 2s (19.0 MiB/s, resumed at 62.0 MiB) from oci://r/m\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log %q lacks %q", out.String(), want)
		}
	}
}

// A narrow terminal drops the bar first, then the verb and the resume note; the numbers stay.
func TestProgressNarrowKeepsTheNumbers(t *testing.T) {
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
