// Command hello greets from its argv[0] and echoes its arguments and environment.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("hello from %s\n", os.Args[0])
	for _, a := range os.Args[1:] {
		fmt.Printf("arg %s\n", a)
	}
	for _, e := range os.Environ() {
		fmt.Printf("env %s\n", e)
	}
}
