package cas

import "golang.org/x/sys/windows"

// readOnly reports whether dir is on a volume that is read-only.
func readOnly(dir string) bool {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return false
	}
	var root [windows.MAX_PATH + 1]uint16
	if windows.GetVolumePathName(p, &root[0], uint32(len(root))) != nil {
		return false
	}
	var flags uint32
	return windows.GetVolumeInformation(&root[0], nil, 0, nil, nil, &flags, nil, 0) == nil && flags&windows.FILE_READ_ONLY_VOLUME != 0
}
