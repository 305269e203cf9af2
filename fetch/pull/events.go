package pull

import (
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
	// Resumed, while bytes arrive, is where this download continued what an earlier pull kept:
	// Bytes-Resumed is what moved. Kept, on failure, is what stays in the CAS for the next pull
	// to continue.
	Resumed, Kept int64
}

func (p *Puller) emit(ev Event) {
	if p.Report.Events != nil {
		p.Report.Events(ev)
	}
}
