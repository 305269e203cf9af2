package fetch

import (
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// Mismatches lists how l disagrees with the intent for platform ("" for this machine's, "all"
// for any platform the lock pins).
func (in Intent) Mismatches(l *lock.Lock, platform string) []lock.Mismatch {
	if in.Capsule == nil {
		return nil
	}
	if platform == "" {
		platform = ref.HostPlatform()
	}
	return l.Check(in.Wants(), platform)
}

// intentProblems are the mismatches as verify and warm report them: one problem each, of kind
// lock-mismatch. A nil intent (a folder with a lock and no murmur.yaml) has none.
func intentProblems(in *Intent, l *lock.Lock, platform string) []verify.Problem {
	if in == nil {
		return nil
	}
	var out []verify.Problem
	for _, m := range in.Mismatches(l, platform) {
		out = append(out, verify.Problem{Kind: verify.ProblemLockMismatch, Subject: m.Name, Problem: m.Detail() + "; run 'mur lock', then commit murmur.lock"})
	}
	return out
}
