// Command sleeper sleeps for argv[1] seconds, then says so.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	fmt.Println("sleeping")
	time.Sleep(time.Duration(n) * time.Second)
	fmt.Println("woke up")
}
