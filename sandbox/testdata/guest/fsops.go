package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// The file-system commands of the sandbox tests:
//
//	paths P...             write each P with its own name as content; "P ok" or "P ERR <error>"
//	swap SECONDS A B SPARE for SECONDS, swap the names A and B through SPARE, in a loop
//	flip SECONDS A B       for SECONDS, move B to A and back, then make A a fresh folder and
//	                       remove it, in a loop: A is a symlink, then a folder, if B is a symlink
//	append SECONDS P       for SECONDS, open P for appending, write a line and close, in a loop
//	probe NAME             say whether NAME is visible, then write probe.txt and remove it
//	state write KEY VALUE | state read KEY | state list .
//
// The loops print how often each step worked, and exit 0 whatever the file system refused.

func paths(args []string) {
	for _, p := range args {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			fmt.Printf("%s ERR %v\n", p, err)
			continue
		}
		fmt.Printf("%s ok\n", p)
	}
}

func swap(args []string) {
	if len(args) != 4 {
		usage("swap SECONDS A B SPARE")
	}
	a, b, spare := args[1], args[2], args[3]
	// Each step goes ahead whatever the one before did, so that the loop heals itself when
	// someone else creates or moves one of the names meanwhile.
	n, cycles := 0, 0
	for until := deadline(args[0]); time.Now().Before(until); cycles++ {
		e1 := os.Rename(a, spare)
		e2 := os.Rename(b, a)
		e3 := os.Rename(a, b)
		e4 := os.Rename(spare, a)
		if e1 == nil && e2 == nil && e3 == nil && e4 == nil {
			n++
		}
	}
	fmt.Printf("swapped %d of %d\n", n, cycles)
}

func flip(args []string) {
	if len(args) != 3 {
		usage("flip SECONDS A B")
	}
	a, b := args[1], args[2]
	n, cycles := 0, 0
	for until := deadline(args[0]); time.Now().Before(until); cycles++ {
		e1 := os.Rename(b, a)
		e2 := os.Rename(a, b)
		e3 := os.Mkdir(a, 0o755)
		e4 := os.Remove(a) // also clears an empty folder someone else made meanwhile
		if e1 == nil && e2 == nil && e3 == nil && e4 == nil {
			n++
		}
	}
	fmt.Printf("flipped %d of %d\n", n, cycles)
}

func appendLoop(args []string) {
	if len(args) != 2 {
		usage("append SECONDS P")
	}
	ok, refused := 0, 0
	for until := deadline(args[0]); time.Now().Before(until); {
		f, err := os.OpenFile(args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			refused++
			continue
		}
		if _, err := f.WriteString("appended by the guest\n"); err == nil {
			ok++
		}
		f.Close()
	}
	fmt.Printf("appended %d refused %d\n", ok, refused)
}

func probe(args []string) {
	if len(args) != 1 {
		usage("probe NAME")
	}
	if _, err := os.Lstat(args[0]); err == nil {
		fmt.Printf("%s visible\n", args[0])
	} else {
		fmt.Printf("%s absent\n", args[0])
	}
	// Leave the folder as it was: a folder someone else renames must stay empty.
	if err := os.WriteFile("probe.txt", []byte("probe"), 0o644); err == nil {
		os.Remove("probe.txt")
	}
}

func deadline(seconds string) time.Time {
	s, err := strconv.ParseFloat(seconds, 64)
	if err != nil {
		usage("SECONDS is a number")
	}
	return time.Now().Add(time.Duration(s * float64(time.Second)))
}

func state(args []string) {
	if len(args) < 2 {
		usage("state write KEY VALUE | state read KEY | state list .")
	}
	name := "state/" + args[1]
	switch args[0] {
	case "write":
		if len(args) != 3 {
			os.Exit(2)
		}
		if err := os.WriteFile(name, []byte(args[2]), 0o600); err != nil {
			fail(err)
		}
	case "read":
		b, err := os.ReadFile(name)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%s\n", b)
	case "list":
		entries, err := os.ReadDir(name)
		if err != nil {
			fail(err)
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				fail(err)
			}
			fmt.Printf("%s %d\n", e.Name(), info.Size())
		}
	default:
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
