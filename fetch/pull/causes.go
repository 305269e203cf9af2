package pull

import (
	"errors"

	"github.com/murmur-nexus/mur/internal/errs"
)

// NoStoreHint is what a pull says when install.from names stores and none is configured.
const NoStoreHint = "no store is configured: add one to .murmur/config.yaml (or $MURMUR_HOME/config.yaml) as stores: [\"oci://registry.example:5000/murmur\"], or pass --store oci://HOST[:PORT]/PREFIX or --store oci-layout:PATH"

// ChainError is the failure of a request at the places it asked: the paragraph a user reads
// for one artifact and, beneath it, each place's own failure, so that a command whose artifacts
// all failed at the same store can say that store's cause once (fetch.Blocked) instead of one
// paragraph per artifact.
type ChainError struct {
	err error
	// What is the request, name@version.
	What string
	// Places are the places asked and why each failed, in the order asked.
	Places []PlaceFailure
	// NoStore is set when install.from names stores and none is configured.
	NoStore bool
	// Hints are the other advice the message ends with (a source install.from did not ask).
	Hints []string
}

func (e *ChainError) Error() string { return e.err.Error() }
func (e *ChainError) Unwrap() error { return e.err }

// PlaceFailure is why one store or source failed a request.
type PlaceFailure struct {
	Place string
	Token errs.Token
	// Cause is the place's own failure. For a store that failed earlier in the command, and so
	// was not asked again, it is that earlier failure: the same cause for every artifact.
	Cause string
}

// failedEarlier marks a store's refusal to be asked again (StoreHealth.enter): what it wraps
// is the failure that marked the store down.
type failedEarlier struct{ error }

func (f *failedEarlier) Unwrap() error { return f.error }

func chainError(err error, what string, asked []string, failures []error, noStore bool) *ChainError {
	ce := &ChainError{err: err, What: what, NoStore: noStore}
	for i, f := range failures {
		cause := f
		var fe *failedEarlier
		if errors.As(f, &fe) {
			cause = fe.error
		}
		ce.Places = append(ce.Places, PlaceFailure{Place: asked[i], Token: errs.TokenOf(f), Cause: errs.Message(cause)})
	}
	return ce
}
