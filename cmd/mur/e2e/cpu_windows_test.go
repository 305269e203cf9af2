package e2e

import (
	"testing"
	"time"
)

// childrenCPU is 0 on Windows, which has no RUSAGE_CHILDREN: the bench's CPU columns are read on
// Linux, where make bench runs.
func childrenCPU(testing.TB) time.Duration { return 0 }

// selfCPU is 0 on Windows, as childrenCPU is.
func selfCPU(testing.TB) time.Duration { return 0 }
