package fetch

import (
	"sync/atomic"
	"time"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/stage"
)

func hooksOf(p *Puller) *download.Hooks {
	if p.Limits.Hooks == nil {
		p.Limits.Hooks = &download.Hooks{}
	}
	return p.Limits.Hooks
}

// HashLast makes p hash a blob fetched over several connections once it is whole, instead of as
// the bytes from its start come in: the other way, for the benchmark that compares the two.
func HashLast(p *Puller) { hooksOf(p).HashLast = true }

// SplitAt makes p split a large blob's single stream into pieces once it has brought n bytes,
// however fast: n 0 goes to pieces before the first byte is written.
func SplitAt(p *Puller, n int64) {
	hooksOf(p).SplitWhen = func(got int64, _ time.Duration) bool { return got >= n }
}

// JudgeFast makes p judge every large blob's stream fast, whatever the machine's speed, and
// counts how often the engine asked.
func JudgeFast(p *Puller, asked *atomic.Int64) {
	hooksOf(p).SplitWhen = func(int64, time.Duration) bool { asked.Add(1); return false }
}

// PiecesFirst makes p fetch a large blob in pieces from the start, without the single stream
// that comes first otherwise.
func PiecesFirst(p *Puller) { hooksOf(p).PiecesFirst = true }

// SlowLink is the rule that splits a large blob's stream.
func SlowLink(n int64, elapsed time.Duration) bool { return download.SlowLink(n, elapsed) }

// OnStageChecked runs f between a staging's path checks and the opening of its folder handles,
// until the test ends; OnStageInstall runs f just before a staged folder is renamed into place.
func OnStageChecked(f func()) (restore func()) {
	stage.CheckedHook = f
	return func() { stage.CheckedHook = nil }
}

func OnStageInstall(f func()) (restore func()) {
	stage.InstallHook = f
	return func() { stage.InstallHook = nil }
}

// PayloadRereads is how many fresh payloads pulls read back from their blob so far.
func PayloadRereads() int64 { return stage.PayloadRereads.Load() }

// HoldStreams keeps every payload stream from following its bytes until the returned func is
// called; the test must call it.
func HoldStreams() func() {
	hold := make(chan struct{})
	wait := func() { <-hold }
	stage.FollowHook.Store(&wait)
	return func() {
		stage.FollowHook.Store(nil)
		close(hold)
	}
}

// SlotBytes is what one --jobs slot is worth (download.Slots).
const SlotBytes = download.SlotBytes

// CountLockWrites counts p's writes of murmur.lock from now on.
func CountLockWrites(p *Puller) *atomic.Int64 {
	p.lockWrites = new(atomic.Int64)
	return p.lockWrites
}
