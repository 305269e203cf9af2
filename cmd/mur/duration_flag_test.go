package main

import (
	"testing"
	"time"
)

// Every duration flag takes whole days, as --since does: --older-than 30d is 720h.
func TestDurationFlagTakesDays(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30d": 720 * time.Hour, "0d": 0, "90m": 90 * time.Minute, "0s": 0} {
		var d time.Duration
		if err := (durationFlag{&d}).Set(in); err != nil || d != want {
			t.Errorf("Set(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"3x", "d", "-1d", "1.5d"} {
		var d time.Duration
		if err := (durationFlag{&d}).Set(bad); err == nil {
			t.Errorf("Set(%q) took %v", bad, d)
		}
	}
}
