// Package slowdown scales the few margins that tests must still measure on the clock (a timeout
// that is itself under test, an upper bound on how long a failure may take) by the factor in
// MUR_TEST_SLOWDOWN, which .ci/run and `make test-under-load` set: a loaded 2-core machine
// stretches every wait, and a margin tuned on an idle laptop would turn into a flake there.
// Anything a test can wait for as an event (a channel, a proxy that stalls until told) waits
// for the event instead.
package slowdown

import (
	"os"
	"strconv"
	"time"
)

// Env is the variable that holds the factor.
const Env = "MUR_TEST_SLOWDOWN"

// Factor is MUR_TEST_SLOWDOWN as a number of at least 1; unset or unreadable means 1.
func Factor() float64 {
	f, err := strconv.ParseFloat(os.Getenv(Env), 64)
	if err != nil || f < 1 {
		return 1
	}
	return f
}

// Scale is d stretched by Factor.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Factor())
}
