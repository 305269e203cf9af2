package download

import (
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Bounds on retrying one blob. A hostile or broken server can answer every request at once and
// wrongly (a Content-Range off by one, a `/*` total, a 416); without these, each wrong answer
// would only start the blob over, forever.
const (
	// maxRetries bounds, per blob, how often the fill asks again after an answer it could not
	// use or a body that broke off: resumes, restarts and the fallback to one stream together.
	maxRetries = 8
	// retryWindow bounds retrying in time: once this long has passed since the blob's last
	// byte arrived (or since its fill began), no further request is made.
	retryWindow = 2 * time.Minute
)

// retry takes one retry from the blob's budget, or reports that it is spent.
func (f *Filler) retry() bool {
	if f.retries >= maxRetries {
		return false
	}
	last := f.began
	if ns := f.lastByte.Load(); ns != 0 {
		last = time.Unix(0, ns)
	}
	if time.Since(last) > retryWindow {
		return false
	}
	f.retries++
	return true
}

// misfit handles an answer that does not fit a ranged request (err wraps ErrNoRanges): the first
// one of a blob ends the ranged attempt, drops what the ingest holds and has the fill go on as
// one stream from byte 0 (the caller then asks for the whole blob); any later one, or one past
// the retry budget, is the store's fault and fails the blob.
func (f *Filler) misfit(err error, format string, args ...any) error {
	if f.oneStream || !f.retry() {
		return errs.Wrap(err, errs.Integrity, "%s answered requests for byte ranges of %s with answers that do not fit them (%v), also after falling back to one stream; nothing was kept; report it to the store's owner", f.from, f.dg, err)
	}
	f.oneStream = true
	f.Untee()
	f.note(format, args...)
	f.xfer.Resumed, f.kept = 0, 0
	return f.w.Restart()
}
