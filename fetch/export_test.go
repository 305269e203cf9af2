package fetch

import (
	"testing"
	"time"
)

// SetReadSeams has murmur.yaml's reads call torn between each try's first stat and its first
// read (try counts from 0) and done once a read has its answer, either may be nil, until t ends.
// A test that sets them does not run in parallel.
func SetReadSeams(t testing.TB, torn func(path string, try int), done func(path string)) {
	readSeams.Store(&readSeam{torn: torn, done: done})
	t.Cleanup(func() { readSeams.Store(nil) })
}

// SetSettle makes d the time murmur.yaml must be left alone for a read of it to count as
// settled, until t ends.
func SetSettle(t testing.TB, d time.Duration) {
	settleNanos.Store(int64(d))
	t.Cleanup(func() { settleNanos.Store(0) })
}
