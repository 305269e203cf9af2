package pull

import (
	"errors"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
)

// keptError is a failed download whose bytes stay in the CAS for the next pull to continue:
// the failure event says how many, so that an interrupted pull can tell the user what was kept.
type keptError struct {
	err  error
	kept int64
}

func (e *keptError) Error() string { return e.err.Error() }
func (e *keptError) Unwrap() error { return e.err }

func keptBytes(err error, n int64) error { return &keptError{err: err, kept: n} }

// keptOf is how many bytes err says were kept for the next pull; 0 when none.
func keptOf(err error) int64 {
	var k *keptError
	if errors.As(err, &k) {
		return k.kept
	}
	return 0
}

// stoppedRecord is the error a pull record keeps for a pull that its caller stopped (Ctrl-C):
// interrupted, not the network error the cut transfer raised, with the bytes kept for the next
// pull, as the command's own message says them.
func stoppedRecord(err error) string {
	kept := "nothing was kept"
	if n := keptOf(err); n > 0 {
		kept = cas.FormatSize(n) + " received were kept in cas/ingest for the next pull to resume"
	}
	return string(errs.Interrupted) + ": the pull was stopped before it finished; " + kept + " (" + errs.Message(err) + ")"
}
