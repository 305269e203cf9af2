//go:build unix

package state

import "golang.org/x/sys/unix"

func openat(dirfd int, name string, flags int) (int, error) {
	return unix.Openat(dirfd, name, flags, 0)
}

func mkdirat(dirfd int, name string) error { return unix.Mkdirat(dirfd, name, 0o700) }

const atFDCWD = unix.AT_FDCWD
