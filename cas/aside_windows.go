package cas

import (
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// touchNoFollow sets path's times to now without following a symlink at path: the handle is
// opened on the link itself (FILE_FLAG_OPEN_REPARSE_POINT), and asks only to write attributes,
// which a read-only file allows.
func touchNoFollow(path string, now time.Time) error {
	name, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	h, err := windows.CreateFile(name, windows.FILE_WRITE_ATTRIBUTES,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil,
		windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT|windows.FILE_FLAG_BACKUP_SEMANTICS, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer windows.CloseHandle(h)
	t := windows.NsecToFiletime(now.UnixNano())
	if err := windows.SetFileTime(h, nil, &t, &t); err != nil {
		return &os.PathError{Op: "SetFileTime", Path: path, Err: err}
	}
	return nil
}
