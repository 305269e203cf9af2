package sandbox

import (
	"fmt"
	"io/fs"
)

// notYours never vouches for a folder on Windows: the compiled cache is trusted only in a folder
// no one else can write, and mur checks that by owner and mode, which on Windows say nothing
// about who may write (an ACL does). So the cache is not used, and runs compile in memory.
func notYours(p string, fi fs.FileInfo) string {
	return fmt.Sprintf("mur can't tell on Windows whether %s is writable by you alone (access there is an ACL's, not an owner's and mode's), and it loads compiled code only from such a folder; runs compile in memory instead (on Linux and macOS the cache is used)", p)
}
