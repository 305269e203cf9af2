package cas

import (
	"context"
	"sync"

	"github.com/opencontainers/go-digest"
)

// Batched durability. A pull of many artifacts makes all of its blobs durable together, rather
// than one fsync after another on its critical path: SyncAll fsyncs every ingest at once (a
// journaling file system commits them in one go, and no fsync waits behind another), then
// CommitAll, under the caller's lock, renames each into place and fsyncs blobs/ once. A blob is
// still visible only once its bytes are durable, and is durably named before CommitAll returns.

// syncParallel bounds the fsyncs in flight: enough for the file system to group them, few enough
// not to flood a small machine with threads blocked in the kernel.
const syncParallel = 16

// SyncAll makes the bytes written to each ingest durable, the fsyncs running side by side. The
// error of ws[i] is at index i. Each Writer must not be in use by another goroutine meanwhile.
func SyncAll(ws []*Writer) []error {
	out := make([]error, len(ws))
	sem := make(chan struct{}, syncParallel)
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = w.Sync()
		}()
	}
	wg.Wait()
	return out
}

// Commit is one ingest of a CommitAll, checked against Size and Want as Writer.Commit checks.
type Commit struct {
	Writer *Writer
	Size   int64
	Want   digest.Digest
}

// CommitAll commits each ingest as Writer.Commit does (checks, then the rename to its blob), and
// then fsyncs blobs/ once for all the renames. Ingests that grew since their last Sync are synced
// first, side by side, before any rename. The error of commits[i] is at index i; when that last fsync fails, every ingest
// renamed has its error.
func (s *Store) CommitAll(ctx context.Context, commits []Commit) []error {
	out := make([]error, len(commits))
	// Whatever grew since its last sync is made durable before any rename, all at once.
	var grown []*Writer
	var at []int
	for i, c := range commits {
		if !c.Writer.done && c.Writer.synced != c.Writer.size {
			grown, at = append(grown, c.Writer), append(at, i)
		}
	}
	for j, err := range SyncAll(grown) {
		if err != nil {
			out[at[j]] = err
			grown[j].Close()
		}
	}
	renamed := false
	for i, c := range commits {
		if out[i] != nil {
			continue
		}
		_, out[i] = c.Writer.commit(ctx, c.Size, c.Want, true)
		renamed = renamed || out[i] == nil
	}
	if !renamed {
		return out
	}
	if err := s.durability.SyncFolder(s.blobs); err != nil {
		err = pathErr(err, "syncing", s.blobs)
		for i := range out {
			if out[i] == nil {
				out[i] = err
			}
		}
	}
	return out
}
