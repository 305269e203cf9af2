// Command exitcode exits with the status given as argv[1].
package main

import (
	"os"
	"strconv"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		os.Exit(99)
	}
	os.Exit(n)
}
