package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"golang.org/x/sys/cpu"
)

// checkCacheDir says why dir can't hold compiled code, or "" when it can. Compiled code is
// mapped executable without further checks, so a folder someone else could write, or one the
// guest can reach through a writable mount, would let them plant native code.
func checkCacheDir(dir string, guestWritable []string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Sprintf("can't make %s absolute: %v", dir, err)
	}
	// Judged before anything is created: by its name and by where its existing part really is
	// (a parent may be a symlink into a workdir).
	resolved := realPath(abs)
	for _, w := range guestWritable {
		if withinAny(abs, w) {
			return fmt.Sprintf("%s is inside %s, which a guest can write; move MURMUR_HOME out of the workdir", abs, w)
		}
		if withinAny(resolved, w) {
			return fmt.Sprintf("%s resolves to %s, inside %s, which a guest can write; move MURMUR_HOME out of the workdir", abs, resolved, w)
		}
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.MkdirPrivate(abs); err != nil {
			return errs.Message(err)
		}
		fi, err = os.Lstat(abs)
	}
	if err != nil {
		return fmt.Sprintf("can't inspect %s: %v", abs, err)
	}
	return private(abs, fi)
}

// private says why fi (at path p) is not a real folder owned by this user at mode 0700.
func private(p string, fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Sprintf("%s is a symlink, and mur only trusts a real folder; remove the symlink", p)
	}
	if !fi.IsDir() {
		return fmt.Sprintf("%s is not a folder; move it away", p)
	}
	if why := notYours(p, fi); why != "" {
		return why
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		return fmt.Sprintf("%s has mode %04o, and mur only trusts mode 0700; run chmod 700 %s (or remove it)", p, perm, p)
	}
	return ""
}

// withinAny reports whether p lies within dir, lexically or once dir's symlinks are resolved.
func withinAny(p, dir string) bool {
	for _, d := range candidates(dir) {
		if atomicfile.Within(p, d) {
			return true
		}
	}
	return false
}

// candidates are the lexical and the symlink-resolved forms of dir.
func candidates(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	out := []string{abs}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil && resolved != abs {
		out = append(out, resolved)
	}
	return out
}

func checkEntryDir(dir string) string {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Sprintf("can't inspect %s: %v", dir, err)
	}
	return private(dir, fi)
}

// wazeroVersion is the version wazero names its cache folder after and writes into each entry,
// found exactly the way wazero's internal/version finds it: the wazero requirement in the build
// information, else the main module's version, else "dev" (as in test binaries).
func wazeroVersion() string {
	v := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if strings.Contains(dep.Path, "github.com/tetratelabs/wazero") {
				v = dep.Version
			}
		}
		if v == "" || v == "(devel)" {
			v = info.Main.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}

const versionDirPrefix = "wazero-"

// versionDir is the folder wazero keeps this version's entries in, or "" if it can't be found
// (then nothing is pruned or checked, rather than guessing wrong).
func versionDir(cacheDir string) string {
	dir := filepath.Join(cacheDir, versionDirPrefix+wazeroVersion()+"-"+runtime.GOARCH+"-"+runtime.GOOS)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ""
	}
	return dir
}

// pruneOldVersions removes the folders of other wazero versions: no build of mur will read them.
func (r *Runner) pruneOldVersions() {
	entries, err := os.ReadDir(r.opt.CacheDir)
	if err != nil {
		return
	}
	current := filepath.Base(r.entryDir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), versionDirPrefix) && e.Name() != current {
			if err := os.RemoveAll(filepath.Join(r.opt.CacheDir, e.Name())); err != nil {
				r.warn(fmt.Sprintf("can't prune the old compiled cache %s: %v", e.Name(), err))
			}
		}
	}
}

func clearDir(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err == nil {
			n++
		}
	}
	return n, nil
}

// staleTemp is how old an unfinished wazero write must be before a check removes it.
const staleTemp = time.Hour

// scanEntries checks every entry in dir against wazero's entry format and returns one line per
// damaged entry, removing each when remove is set.
func scanEntries(dir string, remove bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	version := wazeroVersion()
	var bad []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var problem error
		if strings.HasSuffix(e.Name(), ".tmp") {
			info, err := e.Info()
			if err != nil || time.Since(info.ModTime()) < staleTemp {
				continue // maybe a write in flight
			}
			problem = errors.New("unfinished write left behind")
		} else if !e.Type().IsRegular() {
			problem = errors.New("not a regular file")
		} else {
			problem = checkEntry(p, version, false)
		}
		if problem == nil {
			continue
		}
		line := fmt.Sprintf("compiled cache entry %s: %v", p, problem)
		if remove {
			if err := os.RemoveAll(p); err != nil {
				line += fmt.Sprintf(" (and it can't be removed: %v)", err)
			} else {
				line += " (removed)"
			}
		}
		bad = append(bad, line)
	}
	return bad, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkEntry reads one entry as wazero v1.12's wazevo engine writes it: magic, version, function
// offsets, native code with a CRC-32C, an optional source map, and the catch-clause table.
// headerOnly stops after the offsets and the code length, which is what wazero does not check
// itself; it keeps the check before every run to a few small reads.
func checkEntry(p, version string, headerOnly bool) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := uint64(fi.Size())
	// The header alone is a few KiB and a block of offsets, which a read bigger than the buffer
	// takes straight; a fresh 64 KiB buffer per question would cost more in page faults.
	bufSize := 64 << 10
	if headerOnly {
		bufSize = 4 << 10
	}
	br := bufio.NewReaderSize(f, bufSize)
	var b8 [8]byte
	u32 := func() (uint32, error) {
		_, err := io.ReadFull(br, b8[:4])
		return binary.LittleEndian.Uint32(b8[:4]), err
	}
	u64 := func() (uint64, error) {
		_, err := io.ReadFull(br, b8[:])
		return binary.LittleEndian.Uint64(b8[:]), err
	}
	head := make([]byte, 7)
	if _, err := io.ReadFull(br, head); err != nil {
		return errors.New("truncated header")
	}
	if !bytes.Equal(head[:6], []byte("WAZEVO")) {
		return errors.New("bad magic")
	}
	v := make([]byte, head[6])
	if _, err := io.ReadFull(br, v); err != nil {
		return errors.New("truncated version")
	}
	if string(v) != version {
		return fmt.Errorf("written by wazero %q, not %q", v, version)
	}
	nfuncs, err := u32()
	if err != nil {
		return errors.New("truncated function count")
	}
	if uint64(nfuncs)*8 > size {
		return fmt.Errorf("claims %d functions, more than the file can hold", nfuncs)
	}
	// Read as one block: a Go guest has thousands of functions, and a pull asks this of every
	// payload it finds compiled.
	raw := make([]byte, uint64(nfuncs)*8)
	if _, err := io.ReadFull(br, raw); err != nil {
		return errors.New("truncated function offsets")
	}
	offsets := make([]uint64, nfuncs)
	for i := range offsets {
		offsets[i] = binary.LittleEndian.Uint64(raw[i*8:])
	}
	execLen, err := u64()
	if err != nil {
		return errors.New("truncated code length")
	}
	if execLen > size {
		return fmt.Errorf("claims %d bytes of code in a %d-byte file", execLen, size)
	}
	for i, off := range offsets {
		if off >= execLen || (i > 0 && off < offsets[i-1]) {
			return fmt.Errorf("function %d's offset %d is out of order or outside the code", i, off)
		}
	}
	if headerOnly {
		// The code, its checksum, the source-map flag and the catch-table count must fit.
		pos := uint64(7+len(v)+4) + uint64(nfuncs)*8 + 8
		if size < pos+execLen+4+1+4 {
			return fmt.Errorf("truncated: %d bytes of code claimed, file is %d bytes", execLen, size)
		}
		return nil
	}
	// wazero writes the checksum even when there is no code (a module without functions).
	h := crc32.New(castagnoli)
	if n, err := io.CopyN(h, br, int64(execLen)); err != nil {
		return fmt.Errorf("truncated code (%d of %d bytes)", n, execLen)
	}
	want, err := u32()
	if err != nil {
		return errors.New("truncated checksum")
	}
	if h.Sum32() != want {
		return errors.New("code checksum mismatch")
	}
	flag, err := br.ReadByte()
	if err != nil {
		return errors.New("truncated source map flag")
	}
	switch flag {
	case 0:
	case 1:
		n, err := u64()
		if err != nil || n*16 > size {
			return errors.New("bad source map length")
		}
		if _, err := io.CopyN(io.Discard, br, int64(n*16)); err != nil {
			return errors.New("truncated source map")
		}
	default:
		return fmt.Errorf("bad source map flag %d", flag)
	}
	tables, err := u32()
	if err != nil {
		return errors.New("truncated catch table")
	}
	for i := uint32(0); i < tables; i++ {
		n, err := u32()
		if err != nil || uint64(n)*5 > size {
			return errors.New("bad catch table")
		}
		if _, err := io.CopyN(io.Discard, br, int64(n)*5); err != nil {
			return errors.New("truncated catch table")
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return errors.New("trailing bytes after the entry")
	}
	return nil
}

// entryName predicts the file name wazero v1.12's wazevo engine gives the compiled form of wasm:
// sha256 over the module ID (sha256 of the bytes and the ensure-termination flag, with no
// listeners), the magic "WAZEVO" and the CPU feature flags it compiled for. Knowing the name
// lets a run check its own entry before wazero maps it as code. A test pins this derivation,
// so a wazero upgrade that changes it fails loudly instead of silently skipping the check.
func entryName(wasm []byte, ensureTermination bool) string {
	h := newModuleKey(ensureTermination)
	h.Write(wasm)
	return entryNameOf(h.Sum(nil))
}

// entryNameOf is the entry's file name for a module ID.
func entryNameOf(id []byte) string {
	k := sha256.New()
	k.Write(id)
	k.Write([]byte("WAZEVO"))
	var flags [8]byte
	binary.LittleEndian.PutUint64(flags[:], cpuFeatureFlags())
	k.Write(flags[:])
	return hex.EncodeToString(k.Sum(nil))
}

// moduleKey is wazero's module ID as a streaming hash: sha256 of the bytes, then the
// ensure-termination flag, which Sum appends to a copy so that the hash can go on.
type moduleKey struct {
	hash.Hash
	flag byte
}

func newModuleKey(ensureTermination bool) hash.Hash {
	k := &moduleKey{Hash: sha256.New()}
	if ensureTermination {
		k.flag = 1
	}
	return k
}

func (k *moduleKey) Sum(b []byte) []byte {
	c, err := k.Hash.(hash.Cloner).Clone()
	if err != nil {
		panic(err) // sha256 always clones
	}
	c.Write([]byte{k.flag})
	return c.Sum(b)
}

// cpuFeatureFlags mirrors wazero's internal/platform flags.
func cpuFeatureFlags() uint64 {
	var f uint64
	switch runtime.GOARCH {
	case "amd64":
		if cpu.X86.HasSSE41 {
			f |= 1
		}
		if cpu.X86.HasBMI1 {
			f |= 2
		}
		if cpu.X86.HasBMI1 && cpu.X86.HasBMI2 && cpu.X86.HasPOPCNT {
			f |= 4
		}
	case "arm64":
		if cpu.ARM64.HasATOMICS {
			f |= 1
		}
	}
	return f
}
