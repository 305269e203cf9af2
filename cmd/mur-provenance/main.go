// Command mur-provenance verifies and signs Sigstore bundles for mur. mur starts it, talks to it
// in JSON lines on its standard input and output, and closes it when the command ends; it is a
// separate executable so that sigstore-go's package initialisation never slows mur itself.
// The first line states the protocol version (see provenance.Protocol), and a mur of another
// version is refused rather than half understood, so install it from the same version as mur,
// beside it (go install github.com/murmur-nexus/mur/cmd/...@VERSION, or make build).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "mur-provenance: run by mur to check provenance bundles; it takes no arguments")
		os.Exit(2)
	}
	if err := sigstore.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mur-provenance:", err)
		os.Exit(1)
	}
}
