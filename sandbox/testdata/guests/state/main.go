// Command state writes, reads and lists files in its state store: `write KEY VALUE`,
// `read KEY` or `list .`.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: state write KEY VALUE | state read KEY | state list .")
		os.Exit(2)
	}
	name := "state/" + os.Args[2]
	switch os.Args[1] {
	case "write":
		if len(os.Args) != 4 {
			os.Exit(2)
		}
		if err := os.WriteFile(name, []byte(os.Args[3]), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "read":
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s\n", b)
	case "list":
		entries, err := os.ReadDir("state/" + os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Printf("%s %d\n", e.Name(), info.Size())
		}
	default:
		os.Exit(2)
	}
}
