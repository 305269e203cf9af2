package stage

// OnChecked runs f between a staging's path checks and the opening of its folder handles, and
// OnInstall just before a staged folder is renamed into place, until restore is called. The hooks
// are the package's: a test that sets one does not run in parallel.
func OnChecked(f func()) (restore func()) {
	checkedHook = f
	return func() { checkedHook = nil }
}

func OnInstall(f func()) (restore func()) {
	installHook = f
	return func() { installHook = nil }
}
