package pull

import (
	"context"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func pinLock(ctx context.Context, proj Project, fn func(*lock.Lock) error) error {
	return lock.Update(ctx, proj.LockPath(), fn)
}

// committerIn is a committer of a project whose murmur.lock pins acme/sed at 1.0.0 to sedHex.
func committerIn(t *testing.T, sedHex string) *committer {
	t.Helper()
	c, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	proj := Project{Dir: t.TempDir()}
	err = pinLock(context.Background(), proj, func(l *lock.Lock) error {
		return l.Upsert("acme/sed", "1.0.0", ref.PlatformAny, sedHex, lock.OriginOperator, false)
	})
	if err != nil {
		t.Fatal(err)
	}
	return &committer{cas: c, proj: proj, lock: pinLock, target: ref.PlatformAny}
}

// freshItem is a commit of the bytes blob, expected to be want, pinned as name@version.
func freshItem(t *testing.T, c *cas.Store, blob string, want digest.Digest, name, version string) *commitItem {
	t.Helper()
	w, err := c.NewWriter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := w.Write([]byte(blob)); err != nil {
		t.Fatal(err)
	}
	n, err := ref.ParseName(name)
	if err != nil {
		t.Fatal(err)
	}
	hex := digest.FromString(blob).Encoded()
	return &commitItem{w: w, size: int64(len(blob)), want: want, pin: &pinChange{name: n, version: version, platform: ref.PlatformAny, hex: hex, target: ref.PlatformAny}}
}

// A group commit where one pin conflicts with the lock and one blob fails its commit commits and
// pins the rest, and only what is in the CAS: the failed blob's pin is taken back from the lock
// the pull holds, and the flush writes none of the failures.
func TestCommitterCommitAllPinsOnlyWhatCommitted(t *testing.T) {
	ctx := context.Background()
	cm := committerIn(t, sha("sed 1.0.0").Encoded())
	good := freshItem(t, cm.cas, "grep 1.0.0", digest.FromString("grep 1.0.0"), "acme/grep", "1.0.0")
	badBlob := freshItem(t, cm.cas, "ls 1.0.0", digest.FromString("not these bytes"), "acme/ls", "1.0.0")
	badPin := freshItem(t, cm.cas, "sed 2.0.0", digest.FromString("sed 2.0.0"), "acme/sed", "2.0.0")
	led := &ledger{}
	cm.commitAll(ctx, led, []*commitItem{good, badBlob, badPin})

	if good.err != nil || !cm.cas.Has(good.want) {
		t.Fatalf("the good item: err %v, in the CAS %v", good.err, cm.cas.Has(good.want))
	}
	if badBlob.err == nil || cm.cas.Has(digest.FromString("ls 1.0.0")) {
		t.Errorf("the blob that failed its commit: err %v, in the CAS %v", badBlob.err, cm.cas.Has(digest.FromString("ls 1.0.0")))
	}
	if errs.TokenOf(badPin.err) != errs.LockConflict || cm.cas.Has(badPin.want) {
		t.Errorf("the pin that conflicts: err %v, its blob in the CAS %v", badPin.err, cm.cas.Has(badPin.want))
	}
	if led.held.Find("acme/ls") != nil || led.held.Find("acme/grep") == nil {
		t.Errorf("the lock the pull holds: ls pinned %v, grep pinned %v; want only grep", led.held.Find("acme/ls") != nil, led.held.Find("acme/grep") != nil)
	}
	if len(led.pending) != 1 || led.pending[0] != good.pin {
		t.Errorf("noted %d pins, want only the good item's", len(led.pending))
	}

	cm.flush(ctx, led)
	l, err := lock.Read(cm.proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if l.Find("acme/grep") == nil || l.Find("acme/ls") != nil || l.Find("acme/sed").ResolvedVersion != "1.0.0" {
		t.Errorf("murmur.lock after the flush: %+v", l.Artifacts)
	}
	if err := led.failure("acme/grep"); err != nil {
		t.Errorf("the flush failed grep's pin: %v", err)
	}
}

// Under --locked (no LockWriter) a pin that would change the lock commits its blob, which passed
// the pin's checks, and fails the request with lock-mismatch; nothing is noted for the lock.
func TestCommitterLockedCommitsButRefusesTheChange(t *testing.T) {
	ctx := context.Background()
	cm := committerIn(t, sha("sed 1.0.0").Encoded())
	cm.lock = nil
	it := freshItem(t, cm.cas, "grep 1.0.0", digest.FromString("grep 1.0.0"), "acme/grep", "1.0.0")
	led := &ledger{}
	cm.commitAll(ctx, led, []*commitItem{it})
	if errs.TokenOf(it.err) != errs.LockMismatch || !cm.cas.Has(it.want) {
		t.Errorf("err %v, in the CAS %v; want a lock-mismatch and the blob committed", it.err, cm.cas.Has(it.want))
	}
	if len(led.pending) != 0 {
		t.Errorf("noted %d pins under --locked", len(led.pending))
	}
}

// pinHolds is true only for a pin that leaves murmur.lock's entry as it is.
func TestCommitterPinHolds(t *testing.T) {
	hex := sha("sed 1.0.0").Encoded()
	cm := committerIn(t, hex)
	sed := ref.Name{Scope: "acme", Name: "sed"}
	for _, c := range []struct {
		name string
		pin  *pinChange
		want bool
	}{
		{"the pinned bytes", &pinChange{name: sed, version: "1.0.0", platform: ref.PlatformAny, hex: hex, target: ref.PlatformAny}, true},
		{"other bytes", &pinChange{name: sed, version: "1.0.0", platform: ref.PlatformAny, hex: sha("other").Encoded(), target: ref.PlatformAny, update: true}, false},
		{"an artifact the lock lacks", &pinChange{name: grep, version: "1.0.0", platform: ref.PlatformAny, hex: hex, target: ref.PlatformAny}, false},
	} {
		if got := cm.pinHolds(c.pin); got != c.want {
			t.Errorf("%s: pinHolds = %v, want %v", c.name, got, c.want)
		}
	}
}
