//go:build !linux && !darwin

package safefile

import "io/fs"

// Stamp is "" here, so callers read the content to know it unchanged: a change time no user can
// set back is what a stamp rests on, and Windows lets any writer set its change time.
func Stamp(fi fs.FileInfo) string { return "" }
