package download

import "time"

// How many connections a large blob is fetched over. It starts as one stream, the cheapest way:
// no second request, no reading back to hash. Once the stream has run splitAfter it is judged
// (Connections): more connections bring the bytes faster only where the link, not the taking of
// the bytes (hashing, writing, staging), holds the stream back. A loopback or LAN registry sends
// faster than one core hashes and writes, and so does a registry that shares the machine's cores
// under load: there extra connections only cost (for 256 MiB on loopback, eight doubled the
// registry's CPU). A connection capped by a server or a CDN, or a long-haul link, leaves the
// taker waiting; then the rest is fetched in pieces over as many connections as it has time for.
const (
	splitAfter = 250 * time.Millisecond
	// fastLink is a pace no stream needs help beyond, whatever the taker's.
	fastLink = 128 << 20
	// headroom is how much faster than the link the taker must be for each connection: a second
	// connection is opened only for a taker at least four times the link's pace, so that the
	// timing of a loaded machine's stages does not open connections that only cost.
	headroom = 2
	// judgeFrom is how much the taker must have taken before its pace is trusted: the first
	// chunks go through an idle pipeline at whatever pace a free core gives.
	judgeFrom = 4 << 20
	// steadyFor is how long every judgment must have called for more connections before the
	// stream is split: on a loaded machine the process can wait a while for a core, which a
	// judgment reads as a slow link, once.
	steadyFor = splitAfter / 2
)

// SlowLink reports whether a stream that brought n bytes in elapsed is slow in itself: judged
// after splitAfter, and under fastLink bytes a second.
func SlowLink(n int64, elapsed time.Duration) bool {
	return elapsed >= splitAfter && float64(n) < fastLink*elapsed.Seconds()
}

// Connections is how many connections, up to most, should bring a blob whose single stream
// brings link bytes a second to a taker that takes up to taker bytes a second (0: not known
// yet). Each connection is worth headroom times the link's pace: 1 where the taker is the slower,
// or the link is fast, or the taker was not timed yet.
func Connections(link, taker float64, most int) int {
	if most <= 1 || link >= fastLink || taker <= 0 {
		return 1
	}
	if link <= 0 {
		return most
	}
	return max(1, min(most, int(taker/(link*headroom))))
}

// connections is how many connections the pieces of the blob may use: what the judgment of its
// stream chose, or Options.Connections when there was none (pieces from the start).
func (f *Filler) connections() int {
	if f.conns > 0 {
		return min(f.conns, f.opt.connections())
	}
	return f.opt.connections()
}

// taker is the pace the stream's bytes are taken at, in bytes a second: the slower of the
// ingest's (cas.Writer.Pace) and the staging's that follows them; 0 while not known.
func (c *countingWriter) taker() float64 {
	pace := c.w.Pace()
	if c.teeBusy > 0 {
		tee := float64(c.n) / c.teeBusy.Seconds()
		if pace == 0 || tee < pace {
			pace = tee
		}
	}
	return pace
}

// splitNow stops a stream that more connections would bring faster (Connections), so that the
// rest is fetched in pieces over as many as it chose.
func (c *countingWriter) splitNow() bool {
	if !c.split {
		return false
	}
	if c.first.IsZero() {
		c.first, c.firstN = time.Now(), c.n
	}
	h, elapsed := c.f.opt.hooks(), time.Since(c.start)
	conns := 1
	switch {
	case h.SplitWhen != nil:
		if h.SplitWhen(c.n, elapsed) {
			conns = c.f.opt.connections()
		}
	case elapsed < splitAfter || c.n < judgeFrom:
		return false // too early to tell
	default:
		// The link's pace from the first chunk on: the wait for that one is the request's, and
		// the read-ahead's buffers being made.
		since := time.Since(c.first)
		conns = c.steady(Connections(float64(c.n-c.firstN)/since.Seconds(), c.taker(), c.f.opt.connections()))
		if h.Judged != nil {
			h.Judged(conns)
		}
	}
	if conns < 2 {
		return false
	}
	c.f.conns = conns
	c.err = errSplit
	return true
}

// steady is the judgment conns once the judgments have called for more than one connection for
// steadyFor, the fewest any of them called for; 1 until then.
func (c *countingWriter) steady(conns int) int {
	if conns < 2 {
		c.wantSince, c.wantFewest = time.Time{}, 0
		return 1
	}
	if c.wantSince.IsZero() {
		c.wantSince, c.wantFewest = time.Now(), conns
	}
	c.wantFewest = min(c.wantFewest, conns)
	if time.Since(c.wantSince) < steadyFor {
		return 1
	}
	return c.wantFewest
}
