package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/termtext"
)

// progress renders the events of a pull, warm or push the way docker and oras do. On a
// terminal, each artifact has one line, cut to the terminal's width and redrawn in place: its
// phase, and while bytes move a bar with size and speed. Elsewhere (a pipe, a CI log) it writes
// one plain line per phase change, with no escape codes. Colour is used only on a terminal, and
// never when NO_COLOR is set (https://no-color.org).
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	fd      int // the terminal's, for its width; -1 when w is not a terminal
	quiet   bool
	color   bool
	verb    string // pull, warm or push, for the summary
	hide    map[fetch.Phase]bool
	lines   []*artifactLine
	by      map[string]*artifactLine
	drawn   int // lines of ours on the screen, below which the cursor sits
	last    time.Time
	started time.Time
	now     func() time.Time
	// stopped reports whether Ctrl-C came, so that what fails after it reads "stopped".
	stopped func() bool
	// tick ends the clock that redraws a terminal while a compile, which sends no events, runs.
	tick chan struct{}
}

// artifactLine is the state of one artifact's line.
type artifactLine struct {
	name         string
	phase        fetch.Phase
	bytes, total int64
	from         string
	start        time.Time
	elapsed      time.Duration // of the transfer, once done
	upload       bool          // a push: "to" the store, not "from" it
	compileStart time.Time     // when compiling began; zero when it did not
	compileTook  time.Duration // once done
	// resumed is how much of what an earlier pull kept the download used: the rate counts only
	// the bytes after it. kept is what a failed download left for the next pull. net is what
	// came over the network, once done. One count each, the same in the stopped pull's message,
	// the resume's note, the summary and the pull records.
	resumed, kept, net int64
}

// phaseUpload is a push's transfer; fetch has no such phase, since it only pulls.
const phaseUpload fetch.Phase = "uploading"

// phaseWaiting is an artifact not yet started: every --jobs slot is busy.
const phaseWaiting fetch.Phase = "waiting"

// expect shows every artifact of the command at once, as waiting, so that a terminal shows the
// whole of the work from the start rather than each artifact as a slot frees; and it starts the
// clock that keeps a compile's elapsed time moving. A log gets no waiting lines: they would only
// repeat the names.
func (p *progress) expect(names []string) {
	if p.quiet || !p.tty() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for _, n := range names {
		if _, ok := p.by[n]; ok {
			continue
		}
		l := &artifactLine{name: termtext.Line(n), phase: phaseWaiting, start: now, total: -1}
		p.by[n] = l
		p.lines = append(p.lines, l)
	}
	p.redraw(now)
	p.tick = make(chan struct{})
	go func(stop chan struct{}) {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.mu.Lock()
				for _, l := range p.lines {
					if l.phase == fetch.PhaseCompile {
						p.redraw(p.now())
						break
					}
				}
				p.mu.Unlock()
			}
		}
	}(p.tick)
}

func newProgress(w io.Writer, quiet bool, verb string) *progress {
	// The display writes its own cursor moves and colours; every text in it that came from
	// outside (names, stores) is escaped as it arrives, in event.
	w = raw(w)
	p := &progress{w: w, fd: -1, quiet: quiet, verb: verb, by: map[string]*artifactLine{}, now: time.Now, hide: map[fetch.Phase]bool{}}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.fd = int(f.Fd())
		p.color = os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	}
	p.started = p.now()
	return p
}

// watch makes failures after ctx ends read "stopped": they are the interrupt's, not the
// artifact's.
func (p *progress) watch(e *env) *progress {
	p.stopped = func() bool { return e.ctx.Err() != nil }
	e.interrupted = p.interrupted
	return p
}

func (p *progress) tty() bool { return p.fd >= 0 }

// width is the terminal's current width; a line never reaches the last column, so that no
// terminal wraps it (a wrapped line is what leaves stale copies behind on each redraw).
func (p *progress) width() int {
	if w, _, err := term.GetSize(p.fd); err == nil && w > 0 {
		return w
	}
	return 80
}

func (p *progress) event(ev fetch.Event) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	l, ok := p.by[ev.Name]
	if !ok {
		if p.hide[ev.Phase] {
			return
		}
		l = &artifactLine{name: termtext.Line(ev.Name), start: now, total: -1}
		p.by[ev.Name] = l
		p.lines = append(p.lines, l)
	}
	changed := l.phase != ev.Phase
	if l.phase == phaseWaiting {
		l.start = now // its time runs from its start, not from the command's
	}
	if changed && ev.Phase == fetch.PhaseCompile {
		l.compileStart = now
	}
	l.phase = ev.Phase
	l.upload = l.upload || ev.Phase == phaseUpload
	if ev.Total != 0 {
		l.total = ev.Total
	}
	if ev.Bytes > 0 || ev.Phase == fetch.PhaseFetch || ev.Phase == phaseUpload {
		l.bytes = ev.Bytes
	}
	if ev.Phase == fetch.PhaseFetch || ev.Phase == fetch.PhaseDone {
		l.resumed = ev.Resumed
	}
	if ev.Phase == fetch.PhaseFailed {
		l.kept = ev.Kept
	}
	if ev.From != "" {
		l.from = termtext.Foreign(ev.From)
	}
	if ev.Phase == fetch.PhaseDone || ev.Phase == fetch.PhaseCached {
		l.bytes, l.total, l.net = ev.Bytes, ev.Bytes, ev.Moved
		l.elapsed = ev.Elapsed
		if l.elapsed <= 0 {
			l.elapsed = now.Sub(l.start)
		}
		if !l.compileStart.IsZero() {
			l.compileTook = now.Sub(l.compileStart)
		}
	}
	if !p.tty() {
		if changed && ev.Phase != fetch.PhaseResolve && ev.Phase != fetch.PhaseVerify {
			fmt.Fprintln(p.w, p.text(l, now, 0))
		}
		return
	}
	// Byte counts arrive often; a redraw ten times a second is what a person can read. Every
	// change of phase is drawn at once, so that the 100% frame and "done" always show.
	if !changed && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.redraw(now)
}

// redraw moves the cursor back over the lines drawn before and draws every line again.
func (p *progress) redraw(now time.Time) {
	p.last = now
	width := p.width()
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	for _, l := range p.lines {
		b.WriteString("\r\x1b[K")
		b.WriteString(p.text(l, now, width-1))
		b.WriteByte('\n')
	}
	p.drawn = len(p.lines)
	io.WriteString(p.w, b.String())
}

// nameWidth aligns the phases of all lines, within a third of the width.
func (p *progress) nameWidth(width int) int {
	n := 0
	for _, l := range p.lines {
		n = max(n, len(l.name))
	}
	if width > 0 {
		n = min(n, max(width/3, 10))
	}
	return n
}

// text is one artifact's line, at most width characters (no limit when width is 0).
func (p *progress) text(l *artifactLine, now time.Time, width int) string {
	name := l.name
	status := p.status(l, now, width)
	if width <= 0 {
		return name + ": " + status
	}
	nw := p.nameWidth(width)
	if len(name) > nw {
		// The name's end tells tools of one scope apart; its start says the scope.
		head := (nw - 1) / 3
		name = name[:head] + "…" + name[len(name)-(nw-1-head):]
	}
	line := fmt.Sprintf("%-*s  %s", nw, name, status)
	return p.paint(l.phase, cut(line, width))
}

func (p *progress) status(l *artifactLine, now time.Time, width int) string {
	switch l.phase {
	case fetch.PhaseResolve:
		return "resolving"
	case fetch.PhaseFetch, phaseUpload:
		verb := "downloading"
		if l.phase == phaseUpload {
			verb = "uploading"
		}
		if width <= 0 {
			s := verb
			if l.from != "" && l.phase == fetch.PhaseFetch {
				s += " from " + l.from
			}
			if l.resumed > 0 {
				s += ", resuming at " + cas.FormatSize(l.resumed)
			}
			return s
		}
		return p.transferStatus(l, verb, now.Sub(l.start), width-p.nameWidth(width)-2)
	case fetch.PhaseVerify:
		return "verifying " + cas.FormatSize(l.bytes)
	case phaseWaiting:
		return "waiting"
	case fetch.PhaseCompile:
		if width <= 0 {
			return "compiling"
		}
		return "compiling " + now.Sub(l.compileStart).Round(100*time.Millisecond).String()
	case fetch.PhaseDone:
		s := fmt.Sprintf("done %s in %s (%s/s)", cas.FormatSize(l.bytes), l.elapsed.Round(time.Millisecond), cas.FormatSize(rate(l.moved(), l.elapsed)))
		if l.resumed > 0 {
			s = fmt.Sprintf("done %s in %s (%s/s, resumed at %s)", cas.FormatSize(l.bytes), l.elapsed.Round(time.Millisecond), cas.FormatSize(rate(l.moved(), l.elapsed)), cas.FormatSize(l.resumed))
		}
		if !l.compileStart.IsZero() {
			// The download and the compile, each with its own time: a first pull that spends
			// seconds compiling must not read as a slow download.
			download := l.compileStart.Sub(l.start)
			s = fmt.Sprintf("done %s in %s (download %s at %s/s, compile %s)", cas.FormatSize(l.bytes), (download + l.compileTook).Round(time.Millisecond),
				download.Round(time.Millisecond), cas.FormatSize(rate(l.moved(), download)), l.compileTook.Round(time.Millisecond))
		}
		if l.from != "" && l.upload {
			s += " to " + l.from
		} else if l.from != "" {
			s += " from " + l.from
		}
		return s
	case fetch.PhaseCached:
		return "cached " + cas.FormatSize(l.bytes)
	case fetch.PhaseFailed:
		if p.stopped != nil && p.stopped() {
			return "stopped"
		}
		return "failed"
	}
	return string(l.phase)
}

// moved is how many bytes this command brought in: what an earlier pull kept doesn't count
// toward the rate.
func (l *artifactLine) moved() int64 { return max(l.bytes-l.resumed, 0) }

// transferStatus is a transfer's status in at most room columns. The numbers come first: the
// bar goes before them on a narrow terminal, then the verb and the resume note.
func (p *progress) transferStatus(l *artifactLine, verb string, took time.Duration, room int) string {
	size := cas.FormatSize(l.bytes)
	if l.total > 0 {
		size += "/" + cas.FormatSize(l.total)
	}
	speed := cas.FormatSize(rate(l.moved(), took)) + "/s"
	note := ""
	if l.resumed > 0 {
		note = "resuming at " + cas.FormatSize(l.resumed)
	}
	fits := func(parts ...string) bool {
		n := -1
		for _, s := range parts {
			if s != "" {
				n += 1 + len([]rune(s))
			}
		}
		return n <= room
	}
	join := func(parts ...string) string {
		var out []string
		for _, s := range parts {
			if s != "" {
				out = append(out, s)
			}
		}
		return strings.Join(out, " ")
	}
	whole := true // nothing was dropped: only then is there room for a bar
	if !fits(verb, size, speed, note) {
		note, whole = "", false
	}
	if !fits(verb, size, speed) {
		verb = ""
	}
	if l.total > 0 && whole {
		// The bar takes what is left, from 7 columns ([=====]) up to 26.
		if left := room - len([]rune(join(verb, size, speed, note))) - 1; left >= 7 {
			return join(verb, bar(l.bytes, l.total, min(24, left-2)), size, speed, note)
		}
	}
	return join(verb, size, speed, note)
}

// paint colours a line's status by phase: green when done, red when failed.
func (p *progress) paint(phase fetch.Phase, s string) string {
	if !p.color {
		return s
	}
	switch phase {
	case fetch.PhaseDone, fetch.PhaseCached:
		return "\x1b[32m" + s + "\x1b[0m"
	case fetch.PhaseFailed:
		return "\x1b[31m" + s + "\x1b[0m"
	}
	return s
}

// cut shortens s to width runes.
func cut(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	if width < 1 {
		return ""
	}
	return string(r[:width-1]) + "…"
}

func bar(n, total int64, width int) string {
	filled := int(float64(width) * float64(n) / float64(total))
	filled = min(max(filled, 0), width)
	return "[" + strings.Repeat("=", filled) + strings.Repeat(" ", width-filled) + "]"
}

func rate(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n) / d.Seconds())
}

// finish draws the last frame and a summary line: how many artifacts, fetched, cached and
// failed, with the bytes moved and the time taken.
func (p *progress) finish(err error) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tick != nil {
		close(p.tick)
		p.tick = nil
	}
	now := p.now()
	if p.tty() && len(p.lines) > 0 {
		p.redraw(now)
	}
	var fetched, cached, failed, other int
	var bytes, resumed int64
	for _, l := range p.lines {
		switch l.phase {
		case fetch.PhaseDone:
			fetched++
			bytes += l.net
			resumed += l.resumed
		case fetch.PhaseCached:
			cached++
		case fetch.PhaseFailed:
			if p.stopped != nil && p.stopped() {
				other++
				continue
			}
			failed++
		default:
			other++
		}
	}
	if len(p.lines) == 0 {
		return
	}
	verb := map[string]string{"pull": "fetched", "warm": "fetched", "push": "pushed"}[p.verb]
	var parts []string
	if fetched > 0 && resumed > 0 {
		// The bytes counted are those that moved in this command; what an earlier pull kept
		// is said apart, as its message and the resume's note said it.
		parts = append(parts, fmt.Sprintf("%d %s (%s over the network, %s resumed)", fetched, verb, cas.FormatSize(bytes), cas.FormatSize(resumed)))
	} else if fetched > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (%s)", fetched, verb, cas.FormatSize(bytes)))
	}
	for _, c := range []struct {
		n    int
		what string
	}{{cached, "cached"}, {failed, "failed"}, {other, "stopped"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	fmt.Fprintf(p.w, "%s: %s: %s in %s\n", p.verb, plural(len(p.lines), "artifact"), strings.Join(parts, ", "), now.Sub(p.started).Round(time.Millisecond))
}

// interrupted says, for the interrupted: message, which artifacts had finished (and so stay
// pinned) and which were in flight (and so were removed).
func (p *progress) interrupted() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var done, inflight, kept []string
	for _, l := range p.lines {
		switch l.phase {
		case fetch.PhaseDone, fetch.PhaseCached:
			done = append(done, l.name)
		default:
			inflight = append(inflight, l.name)
			if l.kept > 0 {
				// What it received stays for the next pull: 62 MiB is worth saying.
				kept = append(kept, cas.FormatSize(l.kept)+" of "+l.name)
			}
		}
	}
	sort.Strings(done)
	sort.Strings(inflight)
	var parts []string
	if len(inflight) > 0 {
		verb := " was"
		if len(inflight) > 1 {
			verb = " were"
		}
		note := ""
		switch {
		case len(kept) == 1 && len(inflight) == 1:
			note = fmt.Sprintf(" (%s kept; run the pull again to resume)", strings.TrimSuffix(kept[0], " of "+inflight[0]))
		case len(kept) > 0:
			sort.Strings(kept)
			note = fmt.Sprintf(" (%s kept; run the pull again to resume)", strings.Join(kept, ", "))
		}
		parts = append(parts, strings.Join(inflight, ", ")+verb+" stopped and changed nothing"+note)
	} else {
		parts = append(parts, "nothing was in flight")
	}
	if len(done) > 0 {
		parts = append(parts, strings.Join(done, ", ")+" had finished and stays pinned")
	}
	return strings.Join(parts, "; ")
}
