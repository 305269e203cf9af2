package main

import (
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

func TestCompileWorkersFromEnv(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int
		ok   bool
	}{{"", 0, true}, {"1", 1, true}, {" 4 ", 4, true}, {"0", 0, false}, {"-2", 0, false}, {"two", 0, false}, {"1000", 0, false}} {
		t.Setenv("MUR_COMPILE_WORKERS", c.v)
		n, err := compileWorkersFromEnv()
		if c.ok && (err != nil || n != c.want) {
			t.Errorf("%q: %d, %v; want %d", c.v, n, err, c.want)
		}
		if !c.ok && errs.TokenOf(err) != errs.Usage {
			t.Errorf("%q: %d, %v; want a usage error", c.v, n, err)
		}
	}
	t.Setenv("MUR_COMPILE_WORKERS", "3")
	if got := (&project{}).runnerOptions(nil).CompileWorkers; got != 3 {
		t.Errorf("runnerOptions took %d workers, want 3", got)
	}
}
