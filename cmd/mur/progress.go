package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/murmur-nexus/mur/fetch"
)

// progress renders pull events: a redrawn bar with bytes and speed when stderr is a terminal,
// and one plain line per finished artifact otherwise, so logs stay readable in CI.
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	quiet  bool
	starts map[string]time.Time
	last   time.Time
	drawn  bool
}

func newProgress(w io.Writer, quiet bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &progress{w: w, tty: tty, quiet: quiet, starts: map[string]time.Time{}}
}

func (p *progress) event(ev fetch.Event) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	start, ok := p.starts[ev.Name]
	if !ok {
		start = now
		p.starts[ev.Name] = now
	}
	switch ev.Phase {
	case fetch.PhaseFetch:
		if !p.tty || now.Sub(p.last) < 100*time.Millisecond {
			return
		}
		p.last = now
		fmt.Fprintf(p.w, "\r\033[K%s", bar(ev.Name, ev.Bytes, ev.Total, now.Sub(start)))
		p.drawn = true
	case fetch.PhaseDone, fetch.PhaseCached, fetch.PhaseFailed:
		if p.drawn {
			fmt.Fprint(p.w, "\r\033[K")
			p.drawn = false
		}
		switch ev.Phase {
		case fetch.PhaseDone:
			fmt.Fprintf(p.w, "fetched %s: %s from %s in %s (%s/s)\n", ev.Name, humanBytes(ev.Bytes), ev.From,
				ev.Elapsed.Round(time.Millisecond), humanBytes(rate(ev.Bytes, ev.Elapsed)))
		case fetch.PhaseCached:
			fmt.Fprintf(p.w, "cached  %s: %s\n", ev.Name, humanBytes(ev.Bytes))
		}
	}
}

func bar(name string, n, total int64, elapsed time.Duration) string {
	const width = 24
	speed := humanBytes(rate(n, elapsed)) + "/s"
	if total <= 0 {
		return fmt.Sprintf("%s %s %s", name, humanBytes(n), speed)
	}
	filled := int(float64(width) * float64(n) / float64(total))
	filled = min(max(filled, 0), width)
	b := make([]byte, width)
	for i := range b {
		if i < filled {
			b[i] = '='
		} else {
			b[i] = ' '
		}
	}
	return fmt.Sprintf("%s [%s] %s/%s %s", name, b, humanBytes(n), humanBytes(total), speed)
}

func rate(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n) / d.Seconds())
}
