package githubtest

import (
	"strings"
)

// Requests is a copy of every request seen so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// ResetRequests forgets the requests seen so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Count is the number of requests seen by server (API, Web, Storage, or "" for all) whose path
// starts with pathPrefix ("" for all).
func (s *Server) Count(server, pathPrefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if (server == "" || r.Server == server) && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// Counts are the requests seen so far, by what they cost.
type Counts struct {
	API          int // every API call: what GitHub's rate limit counts
	APIDownloads int // of those, asset downloads through /releases/assets/{id}
	Web          int // download links opened on the web host (no API quota)
	Storage      int // requests to the storage host
}

// Counts sorts the requests seen so far by what they cost.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c Counts
	for _, r := range s.requests {
		switch r.Server {
		case API:
			c.API++
			if strings.Contains(r.Path, "/releases/assets/") && acceptsOctetStream(r.Header.Get("Accept")) {
				c.APIDownloads++
			}
		case Web:
			c.Web++
		case Storage:
			c.Storage++
		}
	}
	return c
}
