package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
)

func packCmd() *command {
	var output string
	return &command{
		name:  "pack",
		args:  "DIR [-o FILE]",
		short: "pack a folder into a .mur.zip",
		long: `Packs DIR's murmur.yaml and its wasm payload (capsule.wasm, or the one *.wasm file) into a
reproducible .mur.zip: the same inputs give the same bytes, and so the same digest. The default
output is <name>-<version>.mur.zip in the current folder.`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVarP(&output, "output", "o", "", "the file to write (default <name>-<version>.mur.zip)")
		},
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur pack takes one folder, got %d arguments; run 'mur pack DIR [-o FILE]'", len(args))
			}
			return runPack(e, args[0], output)
		},
	}
}

// packResult is the --json output of mur pack.
type packResult struct {
	File    string `json:"file"`
	Digest  string `json:"digest"`
	Size    int64  `json:"size"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

func runPack(e *env, dir, output string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errs.Wrap(err, errs.NotFound, "folder %s does not exist; give the folder that holds murmur.yaml and the wasm payload", dir)
		}
		return errs.Wrap(err, errs.IO, "can't read folder %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return usagef("%s is not a folder; give the folder that holds murmur.yaml and the wasm payload", dir)
	}
	var want *artifact.Manifest
	if output == "" {
		m, err := readPackManifest(dir)
		if err != nil {
			return err
		}
		want = &m
		output = m.Name + "-" + m.Version + ".mur.zip"
	}
	if st, err := os.Stat(output); err == nil && st.IsDir() {
		return usagef("output %s is a folder; give a file name such as %s", output, filepath.Join(output, "name-1.0.0.mur.zip"))
	}
	f, err := atomicfile.Create("", output, 0o644)
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't create %s: %v; check that its folder exists and is writable", output, err)
	}
	defer f.Abort()
	h := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(f, h)}
	bw := bufio.NewWriterSize(counter, 256<<10)
	m, err := artifact.Pack(dir, bw)
	if err != nil {
		return err
	}
	if want != nil && (m.Name != want.Name || m.Version != want.Version) {
		return errs.New(errs.IO, "%s changed while it was packed (%s %s, then %s %s); pack again", filepath.Join(dir, artifact.ManifestName), want.Name, want.Version, m.Name, m.Version)
	}
	if err := bw.Flush(); err != nil {
		return errs.Wrap(err, errs.IO, "can't write %s: %v", output, err)
	}
	if err := f.Commit(); err != nil {
		return errs.Wrap(err, errs.IO, "can't write %s: %v", output, err)
	}
	res := packResult{File: output, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: counter.n, Name: m.Name, Version: m.Version}
	if e.g.json {
		return e.JSON(res)
	}
	fmt.Fprintf(e.stdout, "packed %s %s into %s (%d bytes)\n%s\n", res.Name, res.Version, res.File, res.Size, res.Digest)
	return nil
}

// readPackManifest reads DIR/murmur.yaml ahead of packing, for the default output name.
func readPackManifest(dir string) (artifact.Manifest, error) {
	p := filepath.Join(dir, artifact.ManifestName)
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return artifact.Manifest{}, errs.Wrap(err, errs.InvalidArtifact, "%s does not exist; a packed artifact needs a murmur.yaml with name and version beside its wasm payload", p)
		}
		return artifact.Manifest{}, errs.Wrap(err, errs.IO, "can't read %s: %v", p, err)
	}
	if st.Size() > artifact.MaxManifestBytes {
		return artifact.Manifest{}, errs.New(errs.InvalidArtifact, "%s is %d bytes, over the limit of %d; keep it to the fields mur reads", p, st.Size(), artifact.MaxManifestBytes)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return artifact.Manifest{}, errs.Wrap(err, errs.IO, "can't read %s: %v", p, err)
	}
	m, err := artifact.ParseManifest(data)
	if err != nil {
		return artifact.Manifest{}, errs.Wrap(err, errs.TokenOf(err), "%s: %s", dir, errs.Message(err))
	}
	return m, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
