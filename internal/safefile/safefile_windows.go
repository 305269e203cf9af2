package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// NoFollow is the open flag that keeps a final symlink or junction from being followed. Windows
// has no flag that fails on one as O_NOFOLLOW does: with it, the link itself is opened, so the
// caller must look at what it opened, unless it creates the file with O_EXCL, which fails on
// anything already there.
const NoFollow = windows.FILE_FLAG_OPEN_REPARSE_POINT

func open(path string, flag int, perm os.FileMode, oneLink, follow bool) (*os.File, error) {
	// O_TRUNC waits for the checks: truncating first would empty whatever was planted at path.
	how := flag &^ os.O_TRUNC
	if !follow {
		how |= NoFollow
	}
	f, err := os.OpenFile(path, how, perm)
	if err != nil {
		if errors.Is(err, syscall.EISDIR) {
			return nil, &NotRegularError{Path: path, Found: "a folder"}
		}
		return nil, err
	}
	if found, err := kind(f, oneLink); err != nil || found != "" {
		f.Close()
		if err != nil {
			return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
		}
		return nil, &NotRegularError{Path: path, Found: found}
	}
	if flag&os.O_TRUNC != 0 {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, &fs.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	return f, nil
}

// kind names what f is when it is not a regular file with one link, and is "" when it is. A
// name on Windows can't be a FIFO, but it can be a device (NUL, CON) or a junction.
func kind(f *os.File, oneLink bool) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	m := fi.Mode()
	switch {
	case m.IsRegular():
		if !oneLink {
			return "", nil
		}
		var info windows.ByHandleFileInformation
		if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info); err != nil {
			return "", err
		}
		if info.NumberOfLinks > 1 {
			return fmt.Sprintf("a file with %d links", info.NumberOfLinks), nil
		}
		return "", nil
	case m&fs.ModeSymlink != 0:
		return "a symlink", nil
	case m&fs.ModeIrregular != 0:
		return "a junction or another reparse point", nil
	case m.IsDir():
		return "a folder", nil
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO", nil
	case m&fs.ModeDevice != 0:
		return "a device", nil
	}
	return "not a regular file", nil
}
