package ocistore

import (
	"maps"
	"sync"
)

// indexCache keeps the last reading of a layout's index.json, by the file's stamp (inode, size
// and change time): a pull resolves and opens every artifact through index.json, and parsing it
// again for each made a pull of N artifacts from a layout cost N² (half the CPU of a pull of
// 1,000). mur writes index.json by renaming a new file into place, a new inode, and any other
// write changes the change time (to the kernel's clock tick), so a stamp that matches is the file
// that was parsed.
type indexCache struct {
	mu    sync.Mutex
	stamp string
	idx   layoutIndex
}

// get is the reading of the file with stamp, if it is the last one kept; "" is a file without
// a stamp, never kept.
func (c *indexCache) get(stamp string) (layoutIndex, bool) {
	if stamp == "" {
		return layoutIndex{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamp != stamp {
		return layoutIndex{}, false
	}
	idx := c.idx
	idx.top = maps.Clone(c.idx.top)
	return idx, true
}

func (c *indexCache) put(stamp string, idx layoutIndex) {
	if stamp == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stamp, c.idx = stamp, idx
	c.idx.top = maps.Clone(idx.top)
}
