package artifact

import (
	"bytes"
	"errors"
	"testing"
)

// memBlob is a blob in memory that remembers being closed.
type memBlob struct {
	*bytes.Reader
	closed int
}

func (b *memBlob) Close() error { b.closed++; return nil }

func TestOpenBlob(t *testing.T) {
	t.Parallel()
	good := &memBlob{Reader: bytes.NewReader(buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}))}
	a, blob, err := OpenBlob(good, nil)
	if err != nil || a.Manifest.Name != "grep" || blob != good || good.closed != 0 {
		t.Fatalf("good blob: %v, %v, closed %d", a, err, good.closed)
	}
	// A blob that is no artifact is closed here: the caller gets nothing to close.
	bad := &memBlob{Reader: bytes.NewReader([]byte("not a zip"))}
	if _, blob, err := OpenBlob(bad, nil); err == nil || blob != nil || bad.closed != 1 {
		t.Fatalf("bad blob: %v, %v, closed %d", blob, err, bad.closed)
	}
	// The opening's own error passes through.
	gone := errors.New("no such blob")
	if _, blob, err := OpenBlob[*memBlob](nil, gone); err != gone || blob != nil {
		t.Fatalf("failed opening: %v, %v", blob, err)
	}
}
