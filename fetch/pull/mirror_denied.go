package pull

import (
	"context"
	"sync"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A mirror that refuses writes (a pull-through cache answers every write with 405, a registry
// where these credentials may only read answers 403) refuses all of a command's writes alike.
// So the first write-through to a mirror whose answer is unknown goes alone while the others
// wait for it; once the mirror has refused one, the rest of the command asks it nothing more and
// says so once, not once per artifact. Any other failure (the network, a 5xx) leaves the answer
// unknown, and the next write asks again as the chain's health does for reads.

// mirrorWrites is what each mirror said to this process's first write. Its zero value is ready.
type mirrorWrites struct {
	mu    sync.Mutex
	gates map[string]*writeGate
	said  map[[2]string]bool // what the command said once about a mirror (firstTime)
}

// firstTime reports whether this is the first time the command asks about what, for the mirror
// addr: a line said once per command, not once per artifact.
func (m *mirrorWrites) firstTime(addr, what string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.said == nil {
		m.said = map[[2]string]bool{}
	}
	first := !m.said[[2]string{addr, what}]
	m.said[[2]string{addr, what}] = true
	return first
}

type writeGate struct {
	refused error         // the denial that closed the mirror to this command
	probing chan struct{} // closed when the probe's answer is in; nil when no write is probing
	open    bool          // a write went through: later writes go at once
}

// enter admits a write to the mirror addr. It returns the refusal that closed it, or probe true
// when this write asks first and must report its outcome with settle.
func (m *mirrorWrites) enter(ctx context.Context, addr string) (probe bool, refused error, err error) {
	for {
		m.mu.Lock()
		if m.gates == nil {
			m.gates = map[string]*writeGate{}
		}
		g := m.gates[addr]
		if g == nil {
			g = &writeGate{}
			m.gates[addr] = g
		}
		switch {
		case g.refused != nil:
			m.mu.Unlock()
			return false, g.refused, nil
		case g.open:
			m.mu.Unlock()
			return false, nil, nil
		case g.probing == nil:
			g.probing = make(chan struct{})
			m.mu.Unlock()
			return true, nil, nil
		}
		wait := g.probing
		m.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return false, nil, ctx.Err()
		}
	}
}

// settle reports a write's outcome; probe says whether it was the write that asked first. A
// denial closes the mirror for the command, a success opens it, and anything else lets the next
// write probe again. It reports whether this was the mirror's first refusal, the one to tell.
func (m *mirrorWrites) settle(addr string, probe bool, err error) (firstRefusal bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.gates[addr]
	switch {
	case err == nil:
		g.open = true
	case errs.TokenOf(err) == errs.Denied:
		firstRefusal = g.refused == nil
		if firstRefusal {
			g.refused = err
		}
	}
	if probe {
		close(g.probing)
		g.probing = nil
	}
	return firstRefusal
}
