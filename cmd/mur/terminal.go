package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// onTerminal reports whether w writes to a terminal.
func onTerminal(w io.Writer) bool {
	f, ok := raw(w).(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// resultDigest is d as a result line shows it: whole in a pipe or a file, where scripts read it;
// on a terminal, its first 12 hex digits (as docker shows image ids), so that a result line fits
// 80 columns under the progress display instead of wrapping. --json always has it whole.
func resultDigest(w io.Writer, d string) string {
	if !onTerminal(w) || d == "" {
		return d
	}
	return shortDigest(d)
}
