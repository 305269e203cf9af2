package e2e

import (
	"io"
	"time"
)

// slowBody trickles a body at about rate bytes a second, for the throttle script command.
type slowBody struct {
	r    io.ReadCloser
	rate int
}

func (s *slowBody) Read(p []byte) (int, error) {
	const chunk = 64 << 10
	if len(p) > chunk {
		p = p[:chunk]
	}
	n, err := s.r.Read(p)
	time.Sleep(time.Duration(float64(n) / float64(s.rate) * float64(time.Second)))
	return n, err
}

func (s *slowBody) Close() error { return s.r.Close() }
