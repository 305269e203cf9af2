package proxytest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// plan is what one request gets: a snapshot of the options, and whether it is one the fault hits.
type plan struct {
	Options
	fault Fault
	rtt   time.Duration // of the network, whatever the path
}

func (p *Proxy) begin(path string) plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.paths[path]
	if s == nil {
		s = &pathStats{}
		p.paths[path] = s
	}
	s.requests++
	pl := plan{Options: p.opt, rtt: p.opt.RTT}
	if !strings.Contains(path, p.opt.PathContains) {
		return plan{rtt: p.opt.RTT}
	}
	if p.opt.Fault != NoFault && (p.opt.Times <= 0 || p.hits < p.opt.Times) {
		p.hits++
		pl.fault = p.opt.Fault
	}
	return pl
}

func (p *Proxy) count(path string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paths[path].bytes += int64(n)
}

func (p *Proxy) inflicted(pl plan) {
	p.mu.Lock()
	p.faults++
	p.mu.Unlock()
	if pl.OnFault != nil {
		pl.OnFault()
	}
}

// abort drops the client's connection without finishing the answer; net/http recovers this panic
// silently.
func abort() { panic(http.ErrAbortHandler) }

func dropHops(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hops {
		h.Del(name)
	}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	pl := p.begin(path)
	rec := &statusWriter{ResponseWriter: w}
	w = rec
	start := p.clock.now()
	defer func() { p.logged(r, rec.status, start) }()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	if !p.requestArrives(ctx, pl.rtt) {
		abort()
	}

	switch pl.fault {
	case Hangup:
		p.inflicted(pl)
		abort()
	case Silence:
		p.inflicted(pl)
		<-ctx.Done()
		abort()
	}

	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme = p.upstream.Scheme
	out.URL.Host = p.upstream.Host
	out.URL.Path = p.upstream.Path + r.URL.Path
	out.URL.RawPath = ""
	if r.URL.RawPath != "" {
		out.URL.RawPath = p.upstream.Path + r.URL.RawPath
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	dropHops(out.Header)
	if pl.IgnoreRange {
		out.Header.Del("Range")
		out.Header.Del("If-Range")
	}
	resp, err := p.transport.RoundTrip(out)
	answered := p.clock.now()
	var body io.Reader
	if err == nil {
		defer resp.Body.Close()
		body = resp.Body
		if pl.rtt > 0 {
			// The body's chunks are stamped as they come, while the headers are on their way.
			d := p.delay(ctx, resp.Body, pl.rtt)
			defer d.close()
			body = d
		}
	}
	if pl.rtt > 0 && !p.clock.sleepUntil(ctx, answered.Add(pl.rtt/2)) {
		abort()
	}
	if err != nil {
		if ctx.Err() != nil {
			abort()
		}
		http.Error(w, "proxytest: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	dropHops(resp.Header)
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	p.copyBody(ctx, w, body, path, pl)
}

// copyBody sends body on, flushing each chunk so that pacing and faults happen on the wire, not
// in a buffer.
func (p *Proxy) copyBody(ctx context.Context, w http.ResponseWriter, body io.Reader, path string, pl plan) {
	rc := http.NewResponseController(w)
	chunk := int64(32 << 10)
	if pl.BytesPerSecond > 0 {
		// About 32 writes a second keeps the pace smooth without a timer per few bytes.
		chunk = min(max(pl.BytesPerSecond/32, 1), 64<<10)
	}
	buf := make([]byte, chunk)
	start := time.Now()
	var sent int64
	for {
		want := chunk
		if pl.fault == Cut || pl.fault == Stall {
			if sent >= pl.After {
				// An answer of exactly After bytes is whole: the fault has nothing left to spoil.
				if n, err := body.Read(buf[:1]); n == 0 && err == io.EOF {
					return
				}
				p.inflicted(pl)
				_ = rc.Flush() // the status and headers go out even when no body byte does
				if pl.fault == Stall {
					<-ctx.Done()
				}
				abort()
			}
			want = min(want, pl.After-sent)
		}
		n, err := body.Read(buf[:want])
		if n > 0 {
			if pl.BytesPerSecond > 0 {
				// Each chunk leaves when its last byte is due, so no byte is ever early.
				due := start.Add(time.Duration(float64(sent+int64(n)) / float64(pl.BytesPerSecond) * float64(time.Second)))
				if d := time.Until(due); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
						abort()
					}
				}
			}
			// Counted before the write, so that a client that has read a body to its end
			// finds every byte of it counted.
			p.count(path, n)
			m, werr := w.Write(buf[:n])
			if m < n {
				p.count(path, m-n)
			}
			sent += int64(m)
			if werr != nil || rc.Flush() != nil {
				abort()
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			// The upstream broke off: so does the answer, rather than end as if complete.
			abort()
		}
	}
}
