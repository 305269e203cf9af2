// Command fsops is the file-system guest of the sandbox tests.
//
//	fsops paths P...             write each P with its own name as content; "P ok" or "P ERR <error>"
//	fsops swap SECONDS A B SPARE  for SECONDS, swap the names A and B through SPARE, in a loop
//	fsops flip SECONDS A B       for SECONDS, move B to A and back, then make A a fresh folder and
//	                             remove it, in a loop: A is a symlink, then a folder, if B is a symlink
//	fsops append SECONDS P       for SECONDS, open P for appending, write a line and close, in a loop
//	fsops probe NAME             say whether NAME is visible, then write probe.txt and remove it
//
// The loops print how often each step worked, and exit 0 whatever the file system refused.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "paths":
		for _, p := range os.Args[2:] {
			if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
				fmt.Printf("%s ERR %v\n", p, err)
				continue
			}
			fmt.Printf("%s ok\n", p)
		}
	case "swap":
		need(6)
		a, b, spare := os.Args[3], os.Args[4], os.Args[5]
		// Each step goes ahead whatever the one before did, so that the loop heals itself when
		// someone else creates or moves one of the names meanwhile.
		n, cycles := 0, 0
		for until := deadline(); time.Now().Before(until); cycles++ {
			e1 := os.Rename(a, spare)
			e2 := os.Rename(b, a)
			e3 := os.Rename(a, b)
			e4 := os.Rename(spare, a)
			if e1 == nil && e2 == nil && e3 == nil && e4 == nil {
				n++
			}
		}
		fmt.Printf("swapped %d of %d\n", n, cycles)
	case "flip":
		need(5)
		a, b := os.Args[3], os.Args[4]
		n, cycles := 0, 0
		for until := deadline(); time.Now().Before(until); cycles++ {
			e1 := os.Rename(b, a)
			e2 := os.Rename(a, b)
			e3 := os.Mkdir(a, 0o755)
			e4 := os.Remove(a) // also clears an empty folder someone else made meanwhile
			if e1 == nil && e2 == nil && e3 == nil && e4 == nil {
				n++
			}
		}
		fmt.Printf("flipped %d of %d\n", n, cycles)
	case "append":
		need(4)
		ok, refused := 0, 0
		for until := deadline(); time.Now().Before(until); {
			f, err := os.OpenFile(os.Args[3], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
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
	case "probe":
		need(3)
		if _, err := os.Lstat(os.Args[2]); err == nil {
			fmt.Printf("%s visible\n", os.Args[2])
		} else {
			fmt.Printf("%s absent\n", os.Args[2])
		}
		// Leave the folder as it was: a folder someone else renames must stay empty.
		if err := os.WriteFile("probe.txt", []byte("probe"), 0o644); err == nil {
			os.Remove("probe.txt")
		}
	default:
		usage()
	}
}

func deadline() time.Time {
	s, err := strconv.ParseFloat(os.Args[2], 64)
	if err != nil {
		usage()
	}
	return time.Now().Add(time.Duration(s * float64(time.Second)))
}

func need(n int) {
	if len(os.Args) != n {
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: fsops paths P... | swap SECONDS A B SPARE | flip SECONDS A B | append SECONDS P | probe NAME")
	os.Exit(2)
}
