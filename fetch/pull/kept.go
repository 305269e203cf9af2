package pull

import "errors"

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
