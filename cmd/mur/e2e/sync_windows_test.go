package e2e

// syncDisks does nothing: Windows has no call that flushes every volume at once, and the
// benchmarks it serves measure Linux.
func syncDisks() {}
