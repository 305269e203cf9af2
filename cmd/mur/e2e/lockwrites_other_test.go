//go:build !linux

package e2e

import "testing"

// lockWatch counts murmur.lock's writes on Linux only (inotify); elsewhere writes reports -1,
// not measured, and the benchmarks leave the figure out.
type lockWatch struct{}

func watchLock(testing.TB, string) *lockWatch { return &lockWatch{} }

func (*lockWatch) writes() int { return -1 }
