//go:build !linux

package cas

import "os"

// startWriteback does nothing: sync_file_range is Linux's alone, and without it the fsync at
// Commit writes the whole blob back, as on a file system that ignores the hint.
func startWriteback(f *os.File, off, n int64) {}
