package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

func versionCmd() *command {
	return &command{name: "version", short: "print mur's version", run: func(e *env, args []string) error {
		if len(args) > 0 {
			return usagef("mur version takes no arguments, found %q", args)
		}
		wz := "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, d := range bi.Deps {
				if d.Path == "github.com/tetratelabs/wazero" {
					wz = d.Version
				}
			}
		}
		if e.g.json {
			return e.JSON(map[string]string{"version": version, "go": runtime.Version(), "wazero": wz})
		}
		fmt.Fprintf(e.stdout, "mur %s (%s, wazero %s, %s/%s)\n", version, runtime.Version(), wz, runtime.GOOS, runtime.GOARCH)
		return nil
	}}
}
