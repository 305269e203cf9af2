package download

import (
	"context"
	"testing"
)

// Small downloads share a slot, at most eight to one; a large or unknown one takes it whole.
func TestSlotsBoundBytesInFlight(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		jobs int
		size int64
		fit  int // downloads that go at once
	}{
		{"small blobs share a slot", 1, 100 << 10, 8},
		{"a slot's worth of 2 MiB blobs", 1, 2 << 20, 4},
		{"small blobs over 4 slots", 4, 800 << 10, 32},
		{"a large blob takes a slot", 4, 100 << 20, 4},
		{"an unknown size takes a slot", 2, -1, 2},
		{"no jobs is one", 0, SlotBytes, 1},
		{"more jobs than can be is the most there can be", 1 << 62, SlotBytes, maxJobs},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSlots(c.jobs)
			for i := range c.fit {
				if !s.sem.TryAcquire(share(c.size)) {
					t.Fatalf("download %d of %d found no room", i+1, c.fit)
				}
			}
			if s.sem.TryAcquire(share(c.size)) {
				t.Fatalf("download %d went beside %d, want it to wait", c.fit+1, c.fit)
			}
			// Take waits while there is no room, and goes once a download ends.
			taken := make(chan error, 1)
			go func() {
				r, err := s.Take(ctx, c.size)
				if err == nil {
					r()
				}
				taken <- err
			}()
			select {
			case <-taken:
				t.Fatal("Take went while there was no room")
			default:
			}
			s.sem.Release(share(c.size))
			if err := <-taken; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An extra connection needs a whole slot free: a small download holding part of the only slot
// leaves none.
func TestSlotsExtraConnectionTakesAWholeSlot(t *testing.T) {
	s := NewSlots(2)
	release, err := s.Take(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !s.tryWhole() {
		t.Fatal("the second slot is free, but an extra connection could not take it")
	}
	if s.tryWhole() {
		t.Fatal("an extra connection took a slot a small download holds part of")
	}
	release()
	if !s.tryWhole() {
		t.Fatal("no slot after the small download ended")
	}
	s.releaseWhole()
	s.releaseWhole()
	var none *Slots
	if r, err := none.Take(context.Background(), 1); err != nil || !none.tryWhole() {
		t.Fatalf("nil Slots bound something: %v", err)
	} else {
		r()
	}
}
