// notes is the demo capsule tool: it keeps notes in its durable state store (state/notes.txt),
// which outlives every run, and writes a receipt into the workdir, which is the project's.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	args := os.Args[1:]
	if len(args) >= 2 && args[0] == "add" {
		f, err := os.OpenFile("state/notes.txt", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "notes: can't open state/notes.txt:", err)
			os.Exit(1)
		}
		fmt.Fprintln(f, strings.Join(args[1:], " "))
		f.Close()
	}
	b, err := os.ReadFile("state/notes.txt")
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintln(os.Stderr, "notes: can't read state/notes.txt:", err)
		os.Exit(1)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(b) == 0 {
		lines = nil
	}
	fmt.Printf("%s: %d notes in state/notes.txt\n", os.Args[0], len(lines))
	for i, l := range lines {
		fmt.Printf("  %d. %s\n", i+1, l)
	}
	if err := os.WriteFile("receipt.txt", []byte(fmt.Sprintf("%d notes\n", len(lines))), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "notes: can't write receipt.txt:", err)
		os.Exit(1)
	}
	if _, err := os.ReadFile("../murmur.yaml"); err == nil {
		fmt.Println("  (escaped the workdir!)")
		os.Exit(3)
	}
	fmt.Println("  ../murmur.yaml is out of reach, as granted")
}
