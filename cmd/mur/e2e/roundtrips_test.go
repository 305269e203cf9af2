package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/proxytest"
)

// roundTrips reads a pull's request log through a proxy with round trip rtt as chains of round
// trips: a request costs one, and one more when it opened its connection (the handshake), on top
// of the longest chain among the requests it could have waited for: those answered before it
// left the client, for the registry as a whole (the ping, a token) or for its own repository (a
// blob's manifest). On a loaded machine other artifacts' answers come in at any moment, and
// counting them would make every chain as long as the pull. The log's Start is when a request
// left the client (the proxy delays it after that) and End when its answer was in; an answer
// stamped up to rtt/4 after a request left still counts as in, for the proxy stamps End once its
// handler returns, a moment after the client has the bytes. first is the chain of the earliest
// blob request, which ends with the blob's first byte: the critical path before any payload
// moves; last is the longest chain of a blob request, which also counts the waits for a
// download slot.
func roundTrips(log []proxytest.Logged, rtt time.Duration) (first, last int) {
	seen := map[int]bool{}
	depth := make([]int, len(log))
	for i, r := range log {
		own, sent := 1, r.Start.Add(rtt/4)
		if !seen[r.Conn] {
			seen[r.Conn] = true
			own = 2
		}
		before := 0
		for j := range i {
			if q := repository(log[j].Path); (q == "" || q == repository(r.Path)) && !log[j].End.After(sent) {
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

// repository is the repository a registry request is about, "" for the registry as a whole.
func repository(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return ""
	}
	for _, kind := range []string{"/manifests/", "/blobs/", "/referrers/", "/tags/"} {
		if i := strings.LastIndex(rest, kind); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

// The chain of a cold pull at 20 ms: the ping on a new connection (2), the manifests at once,
// one on the ping's connection (3) and one on a new one (4), each blob on its manifest's
// connection (4, 5). A manifest sent before the ping's answer came back does not wait for it.
func TestRoundTripsFollowsTheChain(t *testing.T) {
	t.Parallel()
	const rtt = 20 * time.Millisecond
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	log := []proxytest.Logged{
		{Method: "GET", Path: "/v2/", Conn: 1, Start: at(0), End: at(40)},
		{Method: "GET", Path: "/v2/m/a/manifests/1", Conn: 1, Start: at(41), End: at(61)},
		{Method: "GET", Path: "/v2/m/b/manifests/1", Conn: 2, Start: at(41), End: at(81)},
		{Method: "GET", Path: "/v2/m/a/blobs/sha256:a", Conn: 1, Start: at(62), End: at(90)},
		{Method: "GET", Path: "/v2/m/b/blobs/sha256:b", Conn: 2, Start: at(82), End: at(110)},
	}
	if first, last := roundTrips(log, rtt); first != 4 || last != 5 {
		t.Errorf("round trips to the first blob %d, to the last %d; want 4 and 5", first, last)
	}
	// The second manifest now left before the ping was answered: it no longer waits on it.
	log[2].Start, log[2].End = at(15), at(55)
	log[4].Start = at(55)
	if first, last := roundTrips(log, rtt); first != 3 || last != 4 {
		t.Errorf("with a manifest that did not wait for the ping: %d and %d; want 3 and 4", first, last)
	}
	// Another artifact's answer that came in before a blob left is not on the blob's path.
	log[1].End = at(50)
	if first, last := roundTrips(log, rtt); first != 3 || last != 4 {
		t.Errorf("with another artifact's manifest in before the blob left: %d and %d; want 3 and 4", first, last)
	}
}
