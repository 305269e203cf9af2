package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// make cross builds every system the README says mur builds for, Linux on arm64 among them (the
// fleets' other machine), and the README names each one it builds.
func TestCrossMatchesReadme(t *testing.T) {
	m := regexp.MustCompile(`(?m)^CROSS := (.*)$`).FindStringSubmatch(readDoc(t, "Makefile"))
	if m == nil {
		t.Fatal("the Makefile has no CROSS := line")
	}
	cross := strings.Fields(m[1])
	for _, want := range []string{"linux/arm64", "darwin/arm64", "darwin/amd64", "windows/amd64"} {
		if !slices.Contains(cross, want) {
			t.Errorf("make cross does not build %s (CROSS is %v)", want, cross)
		}
	}
	_, para, _ := strings.Cut(readDoc(t, "README.md"), "**Platforms.**")
	para, _, _ = strings.Cut(para, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	names := map[string]string{"linux": "Linux", "darwin": "macOS", "windows": "Windows"}
	arches := map[string][]string{}
	var order []string
	for _, target := range cross {
		goos, arch, _ := strings.Cut(target, "/")
		if arches[goos] == nil {
			order = append(order, goos)
		}
		arches[goos] = append(arches[goos], arch)
	}
	for _, goos := range order {
		if want := names[goos] + " (" + strings.Join(arches[goos], ", ") + ")"; !strings.Contains(para, want) {
			t.Errorf("the README's Platforms paragraph does not say %q, which make cross builds:\n%s", want, para)
		}
	}
}

// The README and docs/ARCHITECTURE.md quote the same make test runs.
func TestTestTimesAgree(t *testing.T) {
	times := regexp.MustCompile(`about \d+(?:\.\d)? min on a quiet 2-core machine \(two runs on \d{4}-\d\d-\d\d: the unit half \d+ and \d+ s, the\s+end-to-end half \d+ and \d+ s\); (?:\d+ to \d+|about \d+) min with both cores busy`)
	var quoted []string
	for _, page := range []string{"README.md", "docs/ARCHITECTURE.md"} {
		m := times.FindString(readDoc(t, page))
		if m == "" {
			t.Fatalf("%s quotes no make test times in the form %s", page, times)
		}
		quoted = append(quoted, strings.Join(strings.Fields(m), " "))
	}
	if quoted[0] != quoted[1] {
		t.Errorf("the README quotes\n  %s\nand docs/ARCHITECTURE.md\n  %s", quoted[0], quoted[1])
	}
}
