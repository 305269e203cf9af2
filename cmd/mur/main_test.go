package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runMur runs the command line in-process with args and returns its exit status, stdout and
// stderr; every command's tests go through it.
func runMur(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}
