package githubtest

import (
	"net/http"
	"time"
)

// FailNext makes the next n requests (to any server) answer with status, a 5xx.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failStatus = n, status
}

// AlwaysFail makes every request answer with status; 0 turns it off.
func (s *Server) AlwaysFail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alwaysFail = status
}

// FailMessage makes failed answers carry msg as GitHub's "message" instead of the status text:
// a hostile server's, say, with control sequences in it.
func (s *Server) FailMessage(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMessage = msg
}

// FailServer makes every request to server (API, Web or Storage) answer with status; 0 turns it
// off.
func (s *Server) FailServer(server string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOn[server] = status
}

// LimitAPI allows n API calls an hour, as GitHub's primary rate limit does (60 for a client
// without a token). The window starts with the first call after LimitAPI; the call after the
// n-th answers 403 with x-ratelimit-remaining: 0 and x-ratelimit-reset. A 304 to a request with
// a token costs nothing, as on GitHub. Web and storage requests never count. 0 removes the limit.
func (s *Server) LimitAPI(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiLimit, s.apiUsed, s.apiReset = n, 0, time.Time{}
}

// Stall holds every answer, before its headers, for d or until the client gives up.
func (s *Server) Stall(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = d
}

// StallStorageBody makes the storage host send half of each body and then hold the rest for d or
// until the client gives up.
func (s *Server) StallStorageBody(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stallBody = d
}

// RateLimitPrimary makes the API answer 403 with x-ratelimit-remaining: 0 and the given reset
// time, as an exhausted hourly limit does.
func (s *Server) RateLimitPrimary(reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitStatus, s.limitReset, s.retryAfter = http.StatusForbidden, reset, 0
}

// RateLimitSecondary makes the API answer 429 with retry-after: seconds, as a secondary
// (abuse) limit does.
func (s *Server) RateLimitSecondary(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitStatus, s.limitReset, s.retryAfter = http.StatusTooManyRequests, time.Time{}, seconds
}

// Behave turns every misbehaviour switch off (asset replacements stay).
func (s *Server) Behave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.alwaysFail, s.stall, s.stallBody, s.limitStatus = 0, 0, 0, 0, 0
	s.failOn = map[string]int{}
}

// LinkTTL sets how long the storage links signed from now on open; GitHub's last minutes. A
// download that outlives its link must ask the web host or the API for a fresh one.
func (s *Server) LinkTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkTTL = d
}

// ExpireLinks makes every storage link signed so far expire now, as time does to real ones.
func (s *Server) ExpireLinks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiredTill = time.Now()
}
