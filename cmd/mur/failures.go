package main

import (
	"fmt"
	"strings"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
)

// commandFailure is the error a pull or warm ends with, and which results it speaks for: when
// several artifacts failed at their stores and sources, one error that says each cause once
// and the artifacts it blocked (fetch.Blocked) takes the place of the first artifact's.
func commandFailure(e *env, results []fetch.Result, err error) (error, []bool) {
	blocked, covered := fetch.Blocked(results)
	if blocked == nil || e.ctx.Err() != nil {
		return err, make([]bool, len(results))
	}
	for i, r := range results {
		if covered[i] && r.Err == err {
			return blocked, covered
		}
	}
	// The command ends with another error: the causes are said before it.
	fmt.Fprintf(e.stderr, "mur: %s: %s\n", errs.TokenOf(blocked), errs.Message(blocked))
	return err, covered
}

// printFailures gives each failed artifact that err and covered do not speak for its own line,
// with its own token and reason; the command's error is printed last, by main.
func printFailures(e *env, results []fetch.Result, err error, covered []bool) {
	if e.ctx.Err() != nil {
		return
	}
	for i, r := range results {
		if r.Err == nil || r.Err == err || covered[i] {
			continue
		}
		msg := errs.Message(r.Err)
		if !strings.Contains(msg, r.Name) {
			msg = r.Name + ": " + msg
		}
		fmt.Fprintf(e.stderr, "mur: %s: %s\n", errs.TokenOf(r.Err), msg)
	}
}
