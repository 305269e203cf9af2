package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/proxytest"
)

// roundTrips reads a pull's request log through a proxy with round trip rtt as a chain of round
// trips: a request costs one, and one more when it opened its connection (the handshake), on top
// of the longest chain among the requests whose answers were in before it left the client. first
// is the chain of the earliest blob request, which ends with the blob's first byte: the
// critical path before any payload moves; last is that of the blob request that left last.
func roundTrips(log []proxytest.Logged, rtt time.Duration) (first, last int) {
	seen := map[int]bool{}
	depth := make([]int, len(log))
	for i, r := range log {
		own, sent := 1, r.Start.Add(-rtt/2)
		if !seen[r.Conn] {
			seen[r.Conn] = true
			own, sent = 2, sent.Add(-rtt)
		}
		before := 0
		for j := range i {
			if !log[j].End.After(sent) {
				before = max(before, depth[j])
			}
		}
		depth[i] = before + own
		if strings.Contains(r.Path, "/blobs/") {
			if first == 0 || depth[i] < first {
				first = depth[i]
			}
			last = max(last, depth[i])
		}
	}
	return first, last
}

// The chain of a cold pull: the ping on a new connection (2), the manifests at once, one on the
// ping's connection (3) and one on a new one (4), each blob on its manifest's connection (4, 5).
// A manifest sent before the ping's answer came back would not wait for it.
func TestRoundTripsFollowsTheChain(t *testing.T) {
	const rtt = 20 * time.Millisecond
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	log := []proxytest.Logged{
		{Method: "GET", Path: "/v2/", Conn: 1, Start: at(30), End: at(40)},
		{Method: "GET", Path: "/v2/m/a/manifests/1", Conn: 1, Start: at(50), End: at(60)},
		{Method: "GET", Path: "/v2/m/b/manifests/1", Conn: 2, Start: at(70), End: at(80)},
		{Method: "GET", Path: "/v2/m/a/blobs/sha256:a", Conn: 1, Start: at(70), End: at(90)},
		{Method: "GET", Path: "/v2/m/b/blobs/sha256:b", Conn: 2, Start: at(90), End: at(110)},
	}
	if first, last := roundTrips(log, rtt); first != 4 || last != 5 {
		t.Errorf("round trips to the first blob %d, to the last %d; want 4 and 5", first, last)
	}
	// The second manifest now left before the ping was answered: it no longer waits on it.
	log[2].Start, log[2].End = at(45), at(55)
	log[4].Start = at(70)
	if first, last := roundTrips(log, rtt); first != 4 || last != 4 {
		t.Errorf("with a manifest that did not wait for the ping: %d and %d; want 4 and 4", first, last)
	}
}
