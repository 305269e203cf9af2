// Command grow allocates MiB mebibytes in 1 MiB chunks, touching every page, and prints how much
// memory the Go runtime obtained for it: the guest's real memory, which the benchmarks set
// mur's peak RSS against.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
)

var keep [][]byte

func main() {
	mib, err := strconv.Atoi(os.Args[len(os.Args)-1])
	if err != nil || mib < 0 {
		fmt.Fprintln(os.Stderr, "usage: grow MIB")
		os.Exit(2)
	}
	for i := 0; i < mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = byte(i)
		}
		keep = append(keep, b)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("grew %d MiB; guest memory %d MiB\n", mib, ms.Sys>>20)
}
