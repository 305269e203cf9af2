// Command spin says "spinning" on stderr, then never ends by itself: it burns the CPU, or with
// "read" it waits on stdin, where a host call holds it and only mur's grace period ends the run.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "spinning")
	if len(os.Args) > 1 && os.Args[1] == "read" {
		buf := make([]byte, 1)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				os.Exit(3)
			}
		}
	}
	n := 0
	for {
		n++
	}
}
