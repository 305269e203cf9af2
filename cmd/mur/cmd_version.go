package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// buildVersion is what `mur version` reports, read from the build info Go embeds: the module
// version (v1.2.3 for `go install …@v1.2.3`, "(devel)" for a build in a checkout) and the VCS
// revision, time and modified flag (for a build in a git checkout with -buildvcs).
type buildVersion struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Time     string `json:"time"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Wazero   string `json:"wazero"`
	Platform string `json:"platform"`
}

func readBuildVersion(bi *debug.BuildInfo, ok bool) buildVersion {
	v := buildVersion{Version: "unknown", Go: runtime.Version(), Wazero: "unknown", Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/tetratelabs/wazero" {
			v.Wazero = d.Version
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (v buildVersion) String() string {
	s := "mur " + v.Version
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if v.Modified {
			s += ", modified"
		}
		if v.Time != "" {
			s += ", " + v.Time
		}
		s += ")"
	}
	return fmt.Sprintf("%s, %s, wazero %s, %s", s, v.Go, v.Wazero, v.Platform)
}

func versionCmd() *command {
	return &command{
		name:  "version",
		short: "print mur's version (module version and VCS revision from the build)",
		examples: `mur version
mur --version
mur version --json`,
		run: func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("mur version takes no arguments, found %q", args)
			}
			v := readBuildVersion(debug.ReadBuildInfo())
			if e.g.json {
				return e.JSON(v)
			}
			fmt.Fprintln(e.stdout, v)
			return nil
		},
	}
}
