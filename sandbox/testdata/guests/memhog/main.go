// Command memhog allocates memory until it fails. If it ever reaches 3 GiB, the cap did not
// hold, and it says so and exits 0.
package main

import "fmt"

var keep [][]byte

func main() {
	for i := 1; i <= 3072; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = byte(i) // touch every page, so nothing is lazily elided
		}
		keep = append(keep, b)
		if i%16 == 0 {
			fmt.Printf("allocated %d MiB\n", i)
		}
	}
	fmt.Println("allocated 3072 MiB: the memory cap did not hold")
}
