package pull

import (
	"fmt"
	"time"
)

// Phase is where one artifact's pull stands.
type Phase string

// The phases a pull reports, in order; it ends in one of the last three.
const (
	PhaseResolve Phase = "resolving" // asking the lock, the stores and the sources what to fetch
	PhaseFetch   Phase = "fetch"     // bytes are arriving
	PhaseVerify  Phase = "verifying" // checking the payload, committing it, pinning and staging
	PhaseCompile Phase = "compiling" // precompiling the wasm payload
	PhaseDone    Phase = "done"      // fetched, checked, committed, pinned and staged
	PhaseCached  Phase = "cached"    // the CAS held it; nothing was fetched
	PhaseFailed  Phase = "failed"    // nothing became visible; Event.Kept is what stays for the next pull
)

// Event reports progress. Bytes and Total count payload bytes; Total is -1 when unknown.
type Event struct {
	Name    string
	Phase   Phase
	Bytes   int64
	Total   int64
	From    string
	Elapsed time.Duration // since this artifact's pull began
	// Kept, on failure, is what stays in the CAS for the next pull to continue. Resumed, while
	// bytes arrive and when done, is how much of what an earlier pull kept this one used: the
	// same count (Result.Resumed). Moved, when done, is what came over the network in this pull
	// (Result.Transferred); with Resumed it makes the blob, unless the download started over.
	Resumed, Kept, Moved int64
}

func (r Report) warnf(format string, args ...any) {
	if r.Warn != nil {
		r.Warn(fmt.Sprintf(format, args...))
	}
}

func (r Report) emit(ev Event) {
	if r.Events != nil {
		r.Events(ev)
	}
}
