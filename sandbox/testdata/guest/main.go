// Command guest is the one Go guest of mur's tests. It is a multi-call program, as busybox is:
// it behaves as the command its argv[0] names (under `mur run`, the artifact's name), or else as
// the one its first argument names, taking the rest as that command's arguments, or else says
// hello:
//
//	hello ARGS...              greet from argv[0], then echo each argument and the environment
//	exitcode N                 exit with status N
//	sleeper SECONDS            say "sleeping", sleep, then say "woke up"
//	spin [read]                say "spinning" on stderr, then burn the CPU, or with read wait on
//	                           stdin, where a host call holds it, forever
//	grow MIB                   allocate MIB MiB, touching every page, and print the memory the Go
//	                           runtime obtained for it
//	memhog                     allocate until that fails; at 3 GiB say the cap did not hold
//	state write KEY VALUE | state read KEY | state list .
//	                           write, read or list files in the state store
//	escaper SECRET             try every known way out of the sandbox (escaper.go)
//	paths P...                 write each P with its own name as content (fsops.go)
//	swap, flip, append, probe  the file-system races' steps (fsops.go)
//
// One program rather than one per behaviour: wazero takes seconds to compile a Go guest (far
// more under the race detector), so each test binary compiles this one once and shares it.
package main

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"
)

var commands = map[string]func(args []string){
	"hello":    hello,
	"exitcode": exitcode,
	"sleeper":  sleeper,
	"spin":     spin,
	"grow":     grow,
	"memhog":   memhog,
	"state":    state,
	"escaper":  escaper,
	"paths":    paths,
	"swap":     swap,
	"flip":     flip,
	"append":   appendLoop,
	"probe":    probe,
}

func main() {
	args := os.Args[1:]
	if cmd, ok := commands[strings.TrimSuffix(path.Base(os.Args[0]), ".wasm")]; ok {
		cmd(args)
	} else if cmd, ok := commands[first(args)]; ok {
		cmd(args[1:])
	} else {
		hello(args)
	}
}

func first(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

func usage(s string) {
	fmt.Fprintln(os.Stderr, "usage: "+s)
	os.Exit(2)
}

func hello(args []string) {
	fmt.Printf("hello from %s\n", os.Args[0])
	for _, a := range args {
		fmt.Printf("arg %s\n", a)
	}
	for _, e := range os.Environ() {
		fmt.Printf("env %s\n", e)
	}
}

func exitcode(args []string) {
	if len(args) != 1 {
		usage("exitcode N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		os.Exit(99)
	}
	os.Exit(n)
}

func sleeper(args []string) {
	if len(args) != 1 {
		usage("sleeper SECONDS")
	}
	n, _ := strconv.Atoi(args[0])
	fmt.Println("sleeping")
	time.Sleep(time.Duration(n) * time.Second)
	fmt.Println("woke up")
}

func spin(args []string) {
	fmt.Fprintln(os.Stderr, "spinning")
	if len(args) > 0 && args[0] == "read" {
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

// keep holds what grow and memhog allocate, so that nothing is collected.
var keep [][]byte

// grow takes its last argument, so that a runner that passes more (a bare wazero program) still
// sets the size.
func grow(args []string) {
	if len(args) == 0 {
		usage("grow MIB")
	}
	mib, err := strconv.Atoi(args[len(args)-1])
	if err != nil || mib < 0 {
		usage("grow MIB")
	}
	for i := 0; i < mib; i++ {
		keep = append(keep, touched(i))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("grew %d MiB; guest memory %d MiB\n", mib, ms.Sys>>20)
}

// memhog allocates until it fails. If it ever reaches 3 GiB, the cap did not hold, and it says
// so and exits 0.
func memhog([]string) {
	for i := 1; i <= 3072; i++ {
		keep = append(keep, touched(i))
		if i%16 == 0 {
			fmt.Printf("allocated %d MiB\n", i)
		}
	}
	fmt.Println("allocated 3072 MiB: the memory cap did not hold")
}

// touched is 1 MiB with every page written, so that nothing is lazily elided.
func touched(i int) []byte {
	b := make([]byte, 1<<20)
	for j := 0; j < len(b); j += 4096 {
		b[j] = byte(i)
	}
	return b
}
