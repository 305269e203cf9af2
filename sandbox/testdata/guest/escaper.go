package main

import (
	"fmt"
	"os"
)

// escaper tries every known way out of its sandbox and prints one line per attempt:
// "<name> ALLOWED" or "<name> DENIED <error>". Its argument is the host path of a file outside the
// sandbox, so that it can try to name it directly.
func escaper(args []string) {
	if len(args) != 1 {
		usage("escaper SECRET")
	}
	secret := args[0]

	try("symlink-create-abs", os.Symlink(secret, "made-abs"))
	try("symlink-create-rel", os.Symlink("../outside/secret.txt", "made-rel"))
	try("read-made-abs", read("made-abs"))
	try("read-made-rel", read("made-rel"))
	try("read-prelink", read("prelink/secret.txt"))
	try("read-prelink-rel", read("prelink-rel/secret.txt"))
	_, err := os.ReadDir("prelink")
	try("list-prelink", err)
	try("chdir-prelink", os.Chdir("prelink"))
	try("read-dotdot", read("../outside/secret.txt"))
	try("read-abs-host", read(secret))
	try("read-etc-passwd", read("/etc/passwd"))
	try("hardlink-outside", os.Link("prelink/secret.txt", "hl-out"))
	try("hardlink-inside", os.Link("inside.txt", "hl-in"))
	try("rename-out-symlink", os.Rename("victim.txt", "prelink/victim.txt"))
	try("rename-ro-out", os.Rename("ro/existing.txt", "stolen.txt"))
	try("write-ro-new", os.WriteFile("ro/new.txt", []byte("x"), 0o644))
	f, err := os.OpenFile("ro/existing.txt", os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		f.Close()
	}
	try("write-ro-existing", err)
	try("remove-ro", os.Remove("ro/existing.txt"))
	try("mkdir-ro", os.Mkdir("ro/sub", 0o755))
	try("write-state", os.WriteFile("state/x", []byte("escaper"), 0o644))
}

func try(name string, err error) {
	if err != nil {
		fmt.Printf("%s DENIED %v\n", name, err)
		return
	}
	fmt.Printf("%s ALLOWED\n", name)
}

func read(p string) error {
	_, err := os.ReadFile(p)
	return err
}
