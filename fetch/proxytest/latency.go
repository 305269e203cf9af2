package proxytest

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// Latency. A proxy with Options.RTT puts a network's round trip between client and upstream, the
// way a registry in another building does, without capping bandwidth: a new connection's
// handshake costs one RTT before its first request can arrive, a request arrives RTT/2 after the
// client sent it, and the answer's status and headers, then each chunk of its body, arrive RTT/2
// after the upstream gave them, in order. Chunks are delayed side by side, never one after
// another, so a large body still moves at the upstream's speed, just RTT/2 late. So a request on
// a new connection costs 2 RTT and one on a reused connection 1 RTT, as on a real network.

// clock is the time the latency follows: the real one, or a manual one in this package's tests,
// which move it by hand and so never depend on how loaded the machine is.
type clock interface {
	now() time.Time
	// sleepUntil returns once the clock reaches due (true) or ctx ends first (false).
	sleepUntil(ctx context.Context, due time.Time) bool
}

type realClock struct{}

func (realClock) now() time.Time { return time.Now() }

func (realClock) sleepUntil(ctx context.Context, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// connInfo is what the proxy knows of one client connection.
type connInfo struct {
	accepted time.Time
	mu       sync.Mutex
	served   bool
}

type connKey struct{}

// connContext stamps each connection with the moment it was accepted, and its number.
func (p *Proxy) connContext(ctx context.Context, _ net.Conn) context.Context {
	p.mu.Lock()
	p.accepted++
	n := p.accepted
	p.mu.Unlock()
	ctx = context.WithValue(ctx, connNumberKey{}, n)
	return context.WithValue(ctx, connKey{}, &connInfo{accepted: p.clock.now()})
}

// requestArrives waits until a request sent now would reach the upstream: RTT/2 from now, or
// for the first request of a connection RTT/2 after its handshake ends. It is false when ctx
// ends first.
func (p *Proxy) requestArrives(ctx context.Context, rtt time.Duration) bool {
	if rtt <= 0 {
		return true
	}
	sent := p.clock.now()
	if ci, ok := ctx.Value(connKey{}).(*connInfo); ok {
		ci.mu.Lock()
		if !ci.served {
			sent = later(sent, ci.accepted.Add(rtt))
			ci.served = true
		}
		ci.mu.Unlock()
	}
	return p.clock.sleepUntil(ctx, sent.Add(rtt/2))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// delayed is an answer's body as the client receives it: each chunk RTT/2 after the upstream
// gave it. A goroutine reads ahead, so that the delays overlap instead of adding up.
type delayed struct {
	p      *Proxy
	ctx    context.Context
	chunks chan delayedChunk
	stop   chan struct{}
	cur    []byte
	err    error
}

type delayedChunk struct {
	b   []byte
	due time.Time
	err error
}

// delayedChunks bounds what a delayed body holds for a client that reads slowly; a client that
// keeps up never meets it below a few GB/s.
const delayedChunks = 1024

func (p *Proxy) delay(ctx context.Context, body io.Reader, rtt time.Duration) *delayed {
	d := &delayed{p: p, ctx: ctx, chunks: make(chan delayedChunk, delayedChunks), stop: make(chan struct{})}
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := body.Read(buf)
			c := delayedChunk{b: buf[:n], due: p.clock.now().Add(rtt / 2), err: err}
			if p.stamped != nil {
				p.stamped(c)
			}
			select {
			case d.chunks <- c:
			case <-d.stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return d
}

func (d *delayed) Read(b []byte) (int, error) {
	for len(d.cur) == 0 {
		if d.err != nil {
			return 0, d.err
		}
		var c delayedChunk
		select {
		case c = <-d.chunks:
		case <-d.ctx.Done():
			return 0, d.ctx.Err()
		}
		if !d.p.clock.sleepUntil(d.ctx, c.due) {
			return 0, d.ctx.Err()
		}
		d.cur, d.err = c.b, c.err
	}
	n := copy(b, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

// close stops the read-ahead; the upstream body is closed by its owner.
func (d *delayed) close() { close(d.stop) }
