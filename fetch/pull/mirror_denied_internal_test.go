package pull

import (
	"context"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// The gate's answers, write by write: the first write probes; a network failure leaves the next
// to probe again; a success lets later writes go at once, without probing one by one; a denial
// closes the mirror for the rest of the command.
func TestMirrorWritesGate(t *testing.T) {
	ctx := context.Background()
	var m mirrorWrites
	const addr = "oci://mirror.example/murmur"
	enter := func() (bool, error) {
		t.Helper()
		probe, refused, err := m.enter(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		return probe, refused
	}
	if probe, refused := enter(); !probe || refused != nil {
		t.Fatalf("first write: probe %v, refused %v", probe, refused)
	}
	if m.settle(addr, true, errs.New(errs.Network, "down")) {
		t.Fatal("a network failure counted as a refusal")
	}
	if probe, _ := enter(); !probe {
		t.Fatal("after a network failure the next write does not probe")
	}
	m.settle(addr, true, nil)
	for range 2 {
		if probe, refused := enter(); probe || refused != nil {
			t.Fatalf("after a success: probe %v, refused %v; want to go at once", probe, refused)
		}
	}
	denied := errs.New(errs.Denied, "read-only")
	if !m.settle(addr, false, denied) || m.settle(addr, false, denied) {
		t.Fatal("want the first refusal told, and only it")
	}
	if probe, refused := enter(); probe || refused != denied {
		t.Fatalf("after a refusal: probe %v, refused %v", probe, refused)
	}
}
