package pull

import (
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// While one run is busy, what is submitted waits, and the next run takes all of it at once: the
// first of five arrives alone and is committed at once; the four that arrive during its commit
// share the next.
func TestGroupCommitTakesWhatQueuedMeanwhile(t *testing.T) {
	entered := make(chan []int, 10)
	hold := make(chan struct{})
	g := &group[int]{run: func(batch []int) {
		entered <- append([]int(nil), batch...)
		if batch[0] == 1 {
			<-hold
		}
	}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.submit(1) }()
	if b := <-entered; !reflect.DeepEqual(b, []int{1}) {
		t.Fatalf("first run took %v", b)
	}
	for i := 2; i <= 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); g.submit(i) }()
	}
	// Wait until the four are queued behind the busy run: polling only, nothing is timed.
	watchdog := time.After(slowdown.Scale(30 * time.Second))
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == 4 {
			break
		}
		select {
		case <-watchdog:
			t.Fatalf("%d of 4 queued", n)
		case <-time.After(time.Millisecond):
		}
	}
	close(hold)
	wg.Wait()
	b := <-entered
	if len(b) != 4 {
		t.Fatalf("the second run took %v, want the four that queued", b)
	}
	select {
	case b := <-entered:
		t.Fatalf("a third run took %v", b)
	default:
	}
}
