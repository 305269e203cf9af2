// Package atomicfiletest holds what tests of mur's write paths share.
package atomicfiletest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// WriteCalls is how many write system calls this process has made, from /proc/self/io: the
// tests that hold writes to atomicfile.WriteChunk-sized calls count them with it. It skips the
// test where the kernel keeps no such count.
func WriteCalls(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		tb.Skipf("no write count here: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Skip("no syscw in /proc/self/io")
	return 0
}
