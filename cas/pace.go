package cas

import (
	"sync/atomic"
	"time"
)

// pace times one stage of an ingest's pipeline: the bytes it took and the time it spent on them,
// not counting the time it waited for them.
type pace struct {
	bytes, ns atomic.Int64
}

func (p *pace) add(n int, start time.Time) {
	p.bytes.Add(int64(n))
	p.ns.Add(int64(time.Since(start)))
}

// rate is the stage's bytes a second, or 0 before it took any.
func (p *pace) rate() float64 {
	b, ns := p.bytes.Load(), p.ns.Load()
	if b == 0 {
		return 0
	}
	return float64(b) / time.Duration(max(ns, 1)).Seconds()
}

// Pace is how many bytes a second the ingest hashes and writes when it is fed without a pause:
// the slower of the two, as timed so far; 0 before both have taken bytes. A download compares it
// with the pace its connection brings bytes at: more connections help only while the ingest
// waits for them. On a machine whose cores are all taken the stages are timed at the pace they
// get, which is the pace that matters.
func (w *Writer) Pace() float64 {
	h, wr := w.hashPace.rate(), w.writePace.rate()
	if h == 0 || wr == 0 {
		return 0
	}
	return min(h, wr)
}
