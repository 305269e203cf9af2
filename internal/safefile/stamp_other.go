//go:build !linux && !darwin

package safefile

import (
	"io/fs"
	"time"
)

// Stamp is "" here, so callers read the content to know it unchanged: a change time no user can
// set back is what a stamp rests on, and Windows lets any writer set its change time.
func Stamp(fi fs.FileInfo) string { return "" }

// ChangeTime is fi's modification time: the change time here is one any writer may set.
func ChangeTime(fi fs.FileInfo) time.Time { return fi.ModTime() }
