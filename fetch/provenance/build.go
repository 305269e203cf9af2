package provenance

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// BuildVersion is this executable's module version and VCS revision, as far as the build
// recorded them: what mur and mur-provenance tell each other, so that a mismatch names both.
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "unknown"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 && !strings.Contains(v, s.Value[:12]) {
			v += " (" + s.Value[:12] + ")"
		}
	}
	return v
}

// InstallHint says how to install the mur-provenance that goes with a mur of build version v
// (as BuildVersion gives it), and which one mur runs.
func InstallHint(v string) string {
	how := "make build in mur's checkout (it puts both in bin/), or go install github.com/murmur-nexus/mur/cmd/...@<the version of this mur>"
	if mod, _, _ := strings.Cut(v, " "); strings.HasPrefix(mod, "v") && !strings.Contains(mod, "+") {
		// A release or a pseudo-version of a pushed commit: go install can fetch exactly it.
		how = "go install github.com/murmur-nexus/mur/cmd/...@" + mod + " (or make build in mur's checkout)"
	}
	return how + "; mur runs the " + HelperName + " beside its own executable, else the first on PATH, unless MUR_PROVENANCE_HELPER names one"
}

// describeBuild names a build version in a sentence.
func describeBuild(v string) string {
	if v == "" || v == "unknown" || strings.HasPrefix(v, "(devel)") {
		return "a build from a checkout"
	}
	return "build " + strconv.Quote(v)
}
