package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The shared flags are declared once, in flags.go: a command registers the group and never
// declares --platform, --jobs, --connections or -o/--output itself, so that their names,
// defaults, words and checks can't drift apart.
func TestSharedFlagsDeclaredOnce(t *testing.T) {
	decl := regexp.MustCompile(`\.(String|Int|Bool)(Var)?P?\([^)]*"(platform|jobs|connections|output)"`)
	eachSourceLine(t, func(file string, n int, line string) {
		if m := decl.FindStringSubmatch(line); m != nil && file != "flags.go" {
			t.Errorf("%s:%d declares --%s itself; register the group in flags.go instead: %s", file, n, m[3], strings.TrimSpace(line))
		}
	})
}

// Every command's --platform, --jobs, --connections and --output read the same: one usage for
// the payload's platform and one per verb for the pins, one --jobs and --connections, and -o
// wherever --output is.
func TestSharedFlagsAgree(t *testing.T) {
	usages := map[string]map[string]bool{}
	for _, path := range commandPaths() {
		c := find(commands(), path[0])
		if len(path) > 1 {
			c = find(c.subs, path[1])
		}
		fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
		if c.flags != nil {
			c.flags(fs)
		}
		fs.VisitAll(func(f *pflag.Flag) {
			switch f.Name {
			case "jobs", "connections":
				if usages[f.Name] == nil {
					usages[f.Name] = map[string]bool{}
				}
				usages[f.Name][f.Usage+" default "+f.DefValue] = true
			case "output":
				if f.Shorthand != "o" {
					t.Errorf("mur %s --output has no -o", strings.Join(path, " "))
				}
			case "platform":
				if _, ok := f.Annotations[valuesAnnotation]; !ok {
					t.Errorf("mur %s --platform lists no values for completion", strings.Join(path, " "))
				}
			}
		})
	}
	for name, u := range usages {
		if len(u) != 1 {
			t.Errorf("--%s reads %d ways: %v", name, len(u), u)
		}
	}
}
