// Package errs carries the leading token of every mur error.
//
// The command line prints `mur: <token>: <sentence>` and tests ask errors.Is(err, errs.Integrity),
// so the token travels with the error instead of being parsed back out of a string.
package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Token is the machine-readable class of an error. A Token is itself an error, so that
// errors.Is(err, errs.Integrity) holds for any *Error carrying that token.
type Token string

func (t Token) Error() string { return string(t) }

// The tokens of SPEC section 13.
const (
	Usage           Token = "usage"
	NotFound        Token = "not-found"
	Integrity       Token = "integrity"
	IndexMismatch   Token = "index-mismatch"
	OwnerChanged    Token = "owner-changed"
	LockConflict    Token = "lock-conflict"
	LockMismatch    Token = "lock-mismatch" // murmur.lock does not follow murmur.yaml (--locked, mur lock --check)
	NotGranted      Token = "not-granted"
	Offline         Token = "offline"
	RateLimited     Token = "rate-limited"
	Network         Token = "network"
	InvalidLock     Token = "invalid-lock"
	InvalidManifest Token = "invalid-manifest"
	InvalidArtifact Token = "invalid-artifact"
	InvalidConfig   Token = "invalid-config"
	InvalidBundle   Token = "invalid-bundle"
	Timeout         Token = "timeout" // a guest ran past its wall-time limit
	IO              Token = "io"
	Denied          Token = "denied"
	Interrupted     Token = "interrupted"   // Ctrl-C or SIGTERM stopped the command
	GuestCrashed    Token = "guest-crashed" // the guest trapped or died of its memory limit: the run, not the artifact, failed
	Internal        Token = "internal"

	ProvenanceMismatch     Token = "provenance-mismatch"     // a bundle that says another owner, repo, artifact or predicate
	ProvenanceMissing      Token = "provenance-missing"      // no bundle where policy or the lock requires one
	ProvenanceUnverifiable Token = "provenance-unverifiable" // a bundle the trusted roots or keys can't check
	NoProvenance           Token = "no-provenance"           // the warning of policy prefer
)

// Error is an error with a token and a sentence meant for a person.
type Error struct {
	Token Token
	Msg   string
	Err   error // the cause, if any; reachable through errors.Is and errors.As
}

func (e *Error) Error() string { return string(e.Token) + ": " + e.Msg }

// Unwrap exposes the cause, so that sentinels such as fs.ErrNotExist stay testable.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, token) true for the error's own token.
func (e *Error) Is(target error) bool {
	t, ok := target.(Token)
	return ok && t == e.Token
}

// New returns an *Error with a formatted sentence.
func New(tok Token, format string, args ...any) *Error {
	return &Error{Token: tok, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with a formatted sentence that keeps cause reachable.
func Wrap(cause error, tok Token, format string, args ...any) *Error {
	return &Error{Token: tok, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// TokenOf is the token of the outermost *Error in err's chain, or Internal when there is none.
func TokenOf(err error) Token {
	var e *Error
	if errors.As(err, &e) {
		return e.Token
	}
	return Internal
}

// Message is what follows the token when err is printed as `mur: <token>: <sentence>`.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Err != nil && e.Msg == "" {
			return e.Err.Error()
		}
		return e.Msg
	}
	return err.Error()
}

// OSCause is the system's own error beneath an *fs.PathError or *os.LinkError ("permission
// denied", "file exists"), or err itself: mur's sentences name the path already, and the
// wrapper would print it a second time.
func OSCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
