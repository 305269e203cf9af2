package download

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// Job slots. A pull's --jobs bounds the bytes it has in flight, not the number of its requests:
// Jobs slots of SlotBytes each. A download takes as much of one slot as its blob's size (at least
// an eighth of one, at most one), so a project of small artifacts fetches them all at once, each
// a round trip, instead of --jobs at a time, one round trip after another; large blobs still go
// --jobs at a time. Each connection beyond a blob's first (pieces) takes a whole slot, so --jobs
// bounds every connection a pull's downloads open.
const (
	// SlotBytes is what one job slot is worth.
	SlotBytes = 8 << 20
	// minShare is the least a download takes, so that one slot holds at most 8 downloads: a
	// pull's connections stay bounded however small its blobs.
	minShare = SlotBytes / 8
)

// Slots are a pull's job slots; a nil *Slots bounds nothing.
type Slots struct {
	sem  *semaphore.Weighted
	jobs int
}

// NewSlots makes jobs slots: at least one, and at most maxJobs, so that their bytes add up
// without overflowing (a --jobs of 2^40 would make a negative budget no download fits in).
func NewSlots(jobs int) *Slots {
	jobs = min(max(jobs, 1), maxJobs)
	return &Slots{sem: semaphore.NewWeighted(int64(jobs) * SlotBytes), jobs: jobs}
}

// Most is how many downloads the slots hold at once at the most: that many of the smallest.
func (s *Slots) Most() int { return s.jobs * (SlotBytes / minShare) }

// maxJobs is more slots than any pull can use: a connection each.
const maxJobs = 1 << 16

// share is what a download of size bytes takes; a size not known (<0) takes a whole slot.
func share(size int64) int64 {
	if size < 0 || size > SlotBytes {
		return SlotBytes
	}
	return max(size, minShare)
}

// Take waits for room for a download of size bytes and returns its release.
func (s *Slots) Take(ctx context.Context, size int64) (func(), error) {
	if s == nil {
		return func() {}, nil
	}
	n := share(size)
	if err := s.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { s.sem.Release(n) }, nil
}

// TryTake takes room for a download of size bytes if there is room now.
func (s *Slots) TryTake(size int64) (func(), bool) {
	if s == nil {
		return func() {}, true
	}
	n := share(size)
	if !s.sem.TryAcquire(n) {
		return nil, false
	}
	return func() { s.sem.Release(n) }, true
}

// tryWhole takes a whole slot for an extra connection if one is free now.
func (s *Slots) tryWhole() bool { return s == nil || s.sem.TryAcquire(SlotBytes) }

// releaseWhole gives back what tryWhole took.
func (s *Slots) releaseWhole() {
	if s != nil {
		s.sem.Release(SlotBytes)
	}
}
