package fetch

import "sync/atomic"

// CountLockWrites counts p's writes of murmur.lock from now on.
func CountLockWrites(p *Puller) *atomic.Int64 {
	p.lockWrites = new(atomic.Int64)
	return p.lockWrites
}
