package proxytest

import (
	"net/http"
	"slices"
	"time"
)

// Logged is one request the proxy served: when it arrived from the client and when its answer
// was sent in full (or cut), on the proxy's clock, and over which of the proxy's connections
// (numbered from 1 in the order they were accepted).
type Logged struct {
	Method, Path string
	Status       int
	Conn         int
	Start, End   time.Time
}

type connNumberKey struct{}

// Log is every request served since the proxy started or ResetLog, in the order they arrived:
// where a pull's time goes, round trip by round trip.
func (p *Proxy) Log() []Logged {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := slices.Clone(p.log)
	slices.SortStableFunc(out, func(a, b Logged) int { return a.Start.Compare(b.Start) })
	return out
}

// ResetLog empties the request log and the connection count.
func (p *Proxy) ResetLog() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log, p.conns = nil, 0
}

// logged records r once its answer is over.
func (p *Proxy) logged(r *http.Request, status int, start time.Time) {
	n, _ := r.Context().Value(connNumberKey{}).(int)
	end := p.clock.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, Logged{Method: r.Method, Path: r.URL.Path, Status: status, Conn: n, Start: start, End: end})
}

// statusWriter remembers the status an answer was sent with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach Flush on the real writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
