//go:build unix

package cputime

import (
	"crypto/sha256"
	"os/exec"
	"testing"
)

// TestSelfAndChildrenCount: CPU spent in this process shows in Self, not in Children, and a
// waited-for child's shows in Children.
func TestSelfAndChildrenCount(t *testing.T) {
	self, kids := Self(), Children()
	sum := sha256.Sum256(nil)
	for i := 0; i < 300_000; i++ { // tens of milliseconds of CPU on any machine
		sum = sha256.Sum256(sum[:])
	}
	if Self() <= self {
		t.Errorf("Self did not grow over 300,000 hashes (%x)", sum[0])
	}
	if got := Children() - kids; got != 0 {
		t.Errorf("Children grew by %v with no child run", got)
	}
	if err := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done").Run(); err != nil {
		t.Fatal(err)
	}
	if Children() <= kids {
		t.Error("Children did not grow after a busy child exited")
	}
}
