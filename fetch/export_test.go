package fetch

import "time"

// HashLast makes p hash a blob fetched over several connections once it is whole, instead of as
// the bytes from its start come in: the other way, for the benchmark that compares the two.
func HashLast(p *Puller) { p.hashLast = true }

// SplitAt makes p split a large blob's single stream into pieces once it has brought n bytes,
// however fast: n 0 goes to pieces before the first byte is written.
func SplitAt(p *Puller, n int64) {
	p.splitWhen = func(got int64, _ time.Duration) bool { return got >= n }
}

// PiecesFirst makes p fetch a large blob in pieces from the start, without the single stream
// that comes first otherwise.
func PiecesFirst(p *Puller) { p.piecesFirst = true }

// SlowLink is the rule that splits a large blob's stream.
func SlowLink(n int64, elapsed time.Duration) bool { return (&Puller{}).slowLink(n, elapsed) }
