package pull

import (
	"github.com/murmur-nexus/mur/internal/errs"
)

// IntegrityFailure reports whether the place was skipped because it served bytes that failed a
// check (wrong digest, wrong size, bytes that changed): unlike a miss or an outage, the user
// must hear of it whatever the verbosity.
func (s Skipped) IntegrityFailure() bool { return s.Token == string(errs.Integrity) }
