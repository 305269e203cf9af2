// Package sandbox runs WASI preview 1 modules under wazero with exactly the grants mur decides:
// confined preopens, an explicit environment, a memory cap and a wall-clock limit.
//
// A guest gets one preopen, "/": rootFS, mur's own file system over folders the plan opened and
// checked once and holds until the run ends, never wazero's DirFS, whose mounts follow symlinks
// out of the folder. Inside it, rootFS routes state/ to the state store and keeps read-only
// subtrees read-only. Guest memory is reserved up to its cap and committed as the guest grows
// (memory.go), so host memory follows the guest's. Only wasi_snapshot_preview1 is provided.
// Compiled code is cached in wazero's file cache, which mur only trusts when the folder is private
// to the user and out of the guest's reach, and which it repairs rather than letting a bad entry
// fail a run.
//
// Its files: runner.go (compile and run), cache.go (the compiled cache), rootfs.go (the confining
// file system), walk.go (its walk from held folders), rootfile.go (its open files), memory.go
// (guest memory), quota.go (the state store's size limit), plan.go (a capsule's grants as one
// root, from `mur run`), payload.go (the payload from the CAS, and kept payloads) and evict.go
// (what GC removes from the compiled cache with a blob). What differs by system is in files
// ending _unix, _linux, _darwin and _windows; on Windows a guest gets no file system at all
// (plan_windows.go says why).
//
// # Notes
//
//   - BuildPlan and LoadPayload take and return mur's internal types (the capsule manifest, the
//     packed archive); they serve cmd/mur and are not meant as an API for outside code.
//
// Decisions the SPEC leaves open, written down here:
//   - A guest that traps (unreachable, out-of-bounds access) exits 134, the status of a process
//     killed by SIGABRT (128+6); its error carries ErrTrap.
//   - A guest stopped at its time limit exits 124, as under timeout(1); its error carries the
//     token errs.Timeout and ErrTimeout.
//   - Sleeping guests are woken at the deadline, but a guest blocked reading stdin is only
//     stopped once the read returns: wazero can't interrupt a host read.
//   - rootFS refuses to create links, but a hard link the operator already placed in the
//     workdir is, like any file there, the operator's grant.
//   - Only the path component state at the root leads into the store. A symlink in the workdir
//     whose text is "state" leads to the workdir's own state/ folder, never to the store, and a
//     listing of "/" shows the workdir's entries only: the store is routed, not listed.
//   - Symlinks are followed only while they stay inside their tree (the root, or the store); an
//     absolute target is refused (EPERM) even when it names a folder inside.
//   - A rename between the workdir and the store is refused with ENOSYS, as wazero refused one
//     between two preopens; the store's own folder can't be moved, removed or chmod-ed (EPERM).
//   - A read-only subtree and every folder between it and the root can't be moved, removed,
//     replaced, chmod-ed or have their times set: moving one would move the subtree.
package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Sentinels for the exit-status classes of SPEC section 10. Errors returned by Run wrap one of
// them (besides carrying an errs token), so callers can map them with errors.Is or ExitStatus.
var (
	// ErrNotExecutable: the payload is a component, not a valid module, imports something other
	// than wasi_snapshot_preview1, or needs more memory than the cap. Exit status 126.
	ErrNotExecutable = errors.New("payload is not executable")
	// ErrTimeout: the guest ran past its wall-time limit and was stopped. Exit status 124.
	ErrTimeout = errors.New("guest timed out")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack overflow). mur uses
	// 134, the status of an aborted process (128+SIGABRT).
	ErrTrap = errors.New("guest trapped")
	// ErrInterrupted: the caller's context was canceled and the guest was stopped; mur cancels
	// it on SIGINT and SIGTERM. Exit status 130, as shells report a process killed by SIGINT.
	ErrInterrupted = errors.New("run interrupted")
	// ErrMemoryLimit: the guest failed after growing its memory to the cap (limits.memory_mib).
	// The exit status stays the guest's own, or 134 when it trapped.
	ErrMemoryLimit = errors.New("guest used its whole memory limit")
)

// Exit statuses of `mur run` beyond the guest's own code (SPEC section 10).
const (
	StatusTimeout       = 124
	StatusRunnerFailed  = 125
	StatusNotExecutable = 126
	StatusNotPulled     = 127
	StatusTrap          = 134
	StatusInterrupted   = 130
)

// ExitStatus maps Run's results to the process exit status of `mur run`.
func ExitStatus(code int, err error) int {
	switch {
	case err == nil:
		return code
	case errors.Is(err, ErrTimeout):
		return StatusTimeout
	case errors.Is(err, ErrNotExecutable):
		return StatusNotExecutable
	case errors.Is(err, ErrTrap):
		return StatusTrap
	case errors.Is(err, ErrInterrupted):
		return StatusInterrupted
	case errors.Is(err, ErrMemoryLimit):
		return code
	}
	return StatusRunnerFailed
}

// Mount is a host folder the guest sees at GuestPath: the one preopen "/", or a folder routed
// inside it (the state store, a read-only subtree).
type Mount struct {
	GuestPath string `json:"guest"`
	HostPath  string `json:"host"`
	ReadOnly  bool   `json:"read_only"`
}

// Config is one guest process.
type Config struct {
	Args      []string // argv, argv[0] first
	Env       []string // "K=V"; the guest sees these and nothing else
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	MemoryMiB int           // 0: wazero's limit of 4 GiB
	Timeout   time.Duration // 0: none
}

// Options configure a Runner.
type Options struct {
	// CacheDir is the compiled-module cache folder ($MURMUR_HOME/compiled); "" runs without one.
	CacheDir string
	// GuestWritable are host folders some guest can write; a cache inside one is not used.
	GuestWritable []string
	// Warn receives one sentence when the cache can't be used or had to be repaired. Concurrent
	// runs may call it concurrently.
	Warn func(string)
	// CompileWorkers is how many goroutines compile one module's functions; 0 means one per
	// core this process may use (GOMAXPROCS), at most MaxCompileWorkers.
	CompileWorkers int
}

// MaxCompileWorkers bounds the default number of compilation workers: past a handful, the
// serial relocation at the end of wazero's compile dominates, and each worker costs memory.
const MaxCompileWorkers = 8

// compileContext carries the number of compilation workers, which wazero reads from the context
// of CompileModule only. They are not part of the cache key: a module compiled with any number
// of them serves every run.
func (r *Runner) compileContext(ctx context.Context) context.Context {
	n := r.opt.CompileWorkers
	if n <= 0 {
		n = min(runtime.GOMAXPROCS(0), MaxCompileWorkers)
	}
	return experimental.WithCompilationWorkers(ctx, n)
}

// Runner compiles and runs modules. It is safe for concurrent use.
type Runner struct {
	opt      Options
	cache    wazero.CompilationCache
	entryDir string // wazero's version folder inside CacheDir, or "" without a file cache
	repairMu sync.Mutex
}

// New returns a Runner. A cache folder that can't be trusted is a warning, not an error: the run
// goes ahead and compiles in memory.
func New(ctx context.Context, opt Options) (*Runner, error) {
	r := &Runner{opt: opt}
	if opt.CacheDir != "" {
		if why := checkCacheDir(opt.CacheDir, opt.GuestWritable); why != "" {
			r.warn("not using the compiled cache: " + why)
		} else if c, err := wazero.NewCompilationCacheWithDir(opt.CacheDir); err != nil {
			r.warn(fmt.Sprintf("not using the compiled cache %s: %v", opt.CacheDir, err))
		} else {
			r.cache = c
			r.entryDir = versionDir(opt.CacheDir)
			if r.entryDir != "" {
				if why := checkEntryDir(r.entryDir); why != "" {
					_ = c.Close(ctx)
					r.cache, r.entryDir = nil, ""
					r.warn("not using the compiled cache: " + why)
				} else {
					r.pruneOldVersions()
				}
			}
		}
	}
	if r.cache == nil {
		// Still share compiled code between Precompile and Run in this process.
		r.cache = wazero.NewCompilationCache()
	}
	return r, nil
}

// Close releases compiled code held in memory. Files in the cache folder stay.
func (r *Runner) Close(ctx context.Context) error { return r.cache.Close(ctx) }

func (r *Runner) warn(s string) {
	if r.opt.Warn != nil {
		r.opt.Warn(s)
	}
}

// Precompile compiles wasm into the cache, so that a later Run starts warm. A module whose entry
// the cache already holds, whole, is not decoded at all: that is a hash of its bytes and one
// small read, where wazero would decode the module and load the entry.
func (r *Runner) Precompile(ctx context.Context, wasm []byte) error {
	if err := preflight(wasm); err != nil {
		return err
	}
	if r.entryDir != "" && checkEntry(filepath.Join(r.entryDir, entryName(wasm, true)), wazeroVersion(), true) == nil {
		return nil
	}
	rt := wazero.NewRuntimeWithConfig(ctx, r.runtimeConfig().WithDebugInfoEnabled(keepsDebugInfo(wasm)))
	defer rt.Close(ctx)
	cm, err := r.compile(ctx, rt, wasm)
	if err != nil {
		return err
	}
	return cm.Close(ctx)
}

// runtimeConfig is shared by Precompile and Run: closing on context done changes the compiled
// code, and so the cache key, so a precompiled module only helps a run configured the same way.
func (r *Runner) runtimeConfig() wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().WithCompilationCache(r.cache).WithCloseOnContextDone(true)
}

// Run runs wasm's _start to completion, with no file system, and returns the guest's exit code.
// err is non-nil when the guest did not get to choose its code (see ExitStatus). RunPlan runs a
// guest with the file system its plan grants.
func (r *Runner) Run(ctx context.Context, wasm []byte, cfg Config) (int, error) {
	return r.run(ctx, wasm, cfg, nil)
}

// run is Run with root, when not nil, preopened at "/". The caller keeps root and closes it.
func (r *Runner) run(ctx context.Context, wasm []byte, cfg Config, root *rootFS) (int, error) {
	if err := preflight(wasm); err != nil {
		return StatusNotExecutable, err
	}
	rc := r.runtimeConfig().WithDebugInfoEnabled(keepsDebugInfo(wasm))
	if cfg.MemoryMiB > 0 {
		pages := uint64(cfg.MemoryMiB) * 16
		if pages > 65536 {
			pages = 65536
		}
		rc = rc.WithMemoryLimitPages(uint32(pages))
	}
	runCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	// Deferred first, so it runs after rt.Close: nothing may touch guest memory by then.
	alloc := &reservingAllocator{}
	defer alloc.release()
	rt := wazero.NewRuntimeWithConfig(runCtx, rc)
	defer rt.Close(context.WithoutCancel(ctx))

	cm, err := r.compile(runCtx, rt, wasm)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return interrupted(cfg, ctx)
		}
		if errors.Is(err, ErrNotExecutable) {
			return StatusNotExecutable, err
		}
		return StatusRunnerFailed, err
	}
	if err := onlyWASI(cm); err != nil {
		return StatusNotExecutable, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(runCtx, rt); err != nil {
		return StatusRunnerFailed, errs.Wrap(err, errs.Internal, "can't provide wasi_snapshot_preview1: %v", err)
	}

	fsc := wazero.NewFSConfig()
	if root != nil {
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(root, "/")
	}

	mc := wazero.NewModuleConfig().
		WithArgs(cfg.Args...).
		WithFSConfig(fsc).
		WithSysWalltime().
		WithSysNanotime().
		// wazero's own sleep can't be interrupted, so a guest asleep in poll_oneoff would outlive
		// its timeout; this one wakes up when the run's context ends.
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-runCtx.Done():
			}
		}).
		WithRandSource(rand.Reader)
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		mc = mc.WithEnv(k, v)
	}
	if cfg.Stdin != nil {
		mc = mc.WithStdin(cfg.Stdin)
	}
	if cfg.Stdout != nil {
		mc = mc.WithStdout(cfg.Stdout)
	}
	if cfg.Stderr != nil {
		mc = mc.WithStderr(cfg.Stderr)
	}

	// wazero reads the allocator from the context of instantiation only.
	mod, err := rt.InstantiateModule(experimental.WithMemoryAllocator(runCtx, alloc), cm, mc)
	if mod != nil {
		_ = mod.Close(context.WithoutCancel(ctx))
	}
	code, err := r.outcome(ctx, runCtx, cfg, err)
	return memoryNote(cfg, alloc.Peak(), code, err)
}

// memorySlack is how far below its cap a guest's memory may stop and still count as full: a
// guest grows in steps (Go's runtime by megabytes), so the grow that failed was one that would
// have crossed the cap, not one that reached it exactly.
func memorySlack(capBytes uint64) uint64 { return max(capBytes/16, 4<<20) }

// memoryNote adds to a failed run what its author most needs to know when the guest had grown to
// its memory cap: a Go guest then dies with its runtime's own "out of memory" and exit status 2,
// and a C guest with a trap, neither of which names limits.memory_mib. The status stays the
// guest's own (or 134 for a trap).
func memoryNote(cfg Config, peak uint64, code int, err error) (int, error) {
	capBytes := uint64(cfg.MemoryMiB) << 20
	if cfg.MemoryMiB <= 0 || peak+memorySlack(capBytes) < capBytes {
		return code, err
	}
	note := fmt.Sprintf("the guest used its whole memory limit of %d MiB (limits.memory_mib); raise it in murmur.yaml if the guest needs more", cfg.MemoryMiB)
	switch {
	case errors.Is(err, ErrTrap):
		return code, &errs.Error{Token: errs.GuestCrashed, Msg: errs.Message(err) + "; " + note, Err: errors.Join(ErrMemoryLimit, err)}
	case err == nil && code != 0:
		return code, &errs.Error{Token: errs.GuestCrashed, Msg: fmt.Sprintf("the guest %s exited with status %d; %s", argv0(cfg), code, note), Err: ErrMemoryLimit}
	}
	return code, err
}

func (r *Runner) outcome(parent, runCtx context.Context, cfg Config, err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			if parent.Err() == nil {
				return StatusTimeout, &errs.Error{Token: errs.Timeout, Msg: fmt.Sprintf("the guest %s ran longer than its limit of %s and was stopped; raise limits.timeout_s or pass --timeout", argv0(cfg), cfg.Timeout), Err: ErrTimeout}
			}
			return StatusTimeout, &errs.Error{Token: errs.Timeout, Msg: fmt.Sprintf("the guest %s was stopped at the caller's deadline", argv0(cfg)), Err: ErrTimeout}
		case sys.ExitCodeContextCanceled:
			return interrupted(cfg, parent)
		}
		return int(exit.ExitCode()), nil
	}
	if errors.Is(parent.Err(), context.Canceled) {
		return interrupted(cfg, parent)
	}
	if runCtx.Err() == context.DeadlineExceeded && parent.Err() == nil {
		return StatusTimeout, &errs.Error{Token: errs.Timeout, Msg: fmt.Sprintf("the guest %s ran longer than its limit of %s and was stopped", argv0(cfg), cfg.Timeout), Err: ErrTimeout}
	}
	// The artifact passed every check; it is this run that crashed.
	return StatusTrap, &errs.Error{Token: errs.GuestCrashed, Msg: fmt.Sprintf("the guest %s crashed: %v", argv0(cfg), err), Err: errors.Join(ErrTrap, err)}
}

// interrupted is the outcome of a run whose caller canceled it: not mur's failure, nor the
// guest's, since whoever canceled meant it to stop.
func interrupted(cfg Config, parent context.Context) (int, error) {
	return StatusInterrupted, &errs.Error{Token: errs.Interrupted, Msg: fmt.Sprintf("the run of %s was canceled", argv0(cfg)), Err: errors.Join(ErrInterrupted, parent.Err())}
}

func argv0(cfg Config) string {
	if len(cfg.Args) > 0 {
		return cfg.Args[0]
	}
	return "(unnamed)"
}

var (
	wasmMagic     = []byte("\x00asm")
	moduleVersion = []byte{0x01, 0x00, 0x00, 0x00}
	// Components share the magic and differ in the version field (layer 1, version 0x0d).
	componentVersion = []byte{0x0d, 0x00, 0x01, 0x00}
)

func notExecutable(format string, args ...any) error {
	return &errs.Error{Token: errs.InvalidArtifact, Msg: fmt.Sprintf(format, args...), Err: ErrNotExecutable}
}

// preflight rejects what wazero would reject with a less helpful message.
func preflight(wasm []byte) error {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], wasmMagic) {
		return notExecutable("the payload is not a WebAssembly module (it does not start with \\0asm); check that the artifact's payload is a .wasm file built for wasip1")
	}
	if bytes.Equal(wasm[4:8], componentVersion) {
		return notExecutable("the payload is a WebAssembly component; mur runs WASI preview 1 core modules only, so rebuild it for wasm32-wasip1 (GOOS=wasip1 GOARCH=wasm)")
	}
	if !bytes.Equal(wasm[4:8], moduleVersion) {
		return notExecutable("the payload has WebAssembly binary version % x, and mur runs version 1 core modules only", wasm[4:8])
	}
	return nil
}

// onlyWASI refuses imports mur does not provide, before instantiation would fail on them with a
// message about a missing module.
func onlyWASI(cm wazero.CompiledModule) error {
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasi_snapshot_preview1.ModuleName {
			return notExecutable("the module imports %s.%s, and mur provides only %s (no sockets, no other host modules)", mod, name, wasi_snapshot_preview1.ModuleName)
		}
	}
	for _, m := range cm.ImportedMemories() {
		mod, name, _ := m.Import()
		return notExecutable("the module imports its memory %s.%s, and mur provides only %s functions", mod, name, wasi_snapshot_preview1.ModuleName)
	}
	return nil
}

// compile compiles wasm, repairing the file cache once if a bad entry made wazero fail.
func (r *Runner) compile(ctx context.Context, rt wazero.Runtime, wasm []byte) (wazero.CompiledModule, error) {
	if r.entryDir != "" {
		r.checkOwnEntry(wasm)
	}
	ctx = r.compileContext(ctx)
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil && r.entryDir != "" && isCacheError(err) {
		r.repair(err)
		cm, err = rt.CompileModule(ctx, wasm)
	}
	if err != nil {
		if isCacheError(err) {
			return nil, errs.Wrap(err, errs.IO, "the compiled cache %s failed even after repair: %v; remove that folder and run again", r.opt.CacheDir, err)
		}
		if ctx.Err() != nil {
			return nil, errs.Wrap(err, errs.Internal, "compiling the module was interrupted: %v", ctx.Err())
		}
		if err := memoryLimitError(err); err != nil {
			return nil, err
		}
		return nil, &errs.Error{Token: errs.InvalidArtifact, Msg: fmt.Sprintf("the payload is not a valid WebAssembly module: %v", err), Err: errors.Join(ErrNotExecutable, err)}
	}
	return cm, nil
}

// checkOwnEntry checks this module's cache entry before wazero loads it. wazero verifies a
// checksum over the native code but not the function offsets in front of it, and a damaged
// offset would send the guest into the middle of an instruction instead of failing.
func (r *Runner) checkOwnEntry(wasm []byte) {
	p := filepath.Join(r.entryDir, entryName(wasm, true))
	err := checkEntry(p, wazeroVersion(), true)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return
	}
	r.repairMu.Lock()
	defer r.repairMu.Unlock()
	if rmErr := os.Remove(p); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		r.warn(fmt.Sprintf("the compiled cache entry %s is damaged (%v) and can't be removed: %v", p, err, rmErr))
		return
	}
	r.warn(fmt.Sprintf("the compiled cache entry for this module was damaged (%v); removed it, and the module is compiled again", err))
}

// isCacheError recognises wazero's errors about a file-cache entry it could not load. wazero
// reports them from CompileModule instead of falling back to compiling.
func isCacheError(err error) bool {
	return strings.Contains(err.Error(), "compilationcache:")
}

func (r *Runner) repair(cause error) {
	r.repairMu.Lock()
	defer r.repairMu.Unlock()
	bad, err := scanEntries(r.entryDir, true)
	switch {
	case err != nil:
		r.warn(fmt.Sprintf("the compiled cache had a bad entry (%v) and could not be checked: %v", cause, err))
	case len(bad) == 0:
		// wazero found a problem our check can't see: start the version folder afresh.
		n, _ := clearDir(r.entryDir)
		r.warn(fmt.Sprintf("the compiled cache had a bad entry (%v); removed all %d entries of %s, and the module is compiled again", cause, n, filepath.Base(r.entryDir)))
	default:
		files, them := "bad entry files", "them"
		if len(bad) == 1 {
			files, them = "bad entry file", "it"
		}
		r.warn(fmt.Sprintf("the compiled cache had %d %s (%v); removed %s, and the module is compiled again", len(bad), files, cause, them))
	}
}

// CheckCache checks every entry of the compiled cache and returns a description of each damaged
// one. With repair set it removes them, so the next run compiles afresh. It is for `mur verify`.
func (r *Runner) CheckCache(repair bool) ([]string, error) {
	if r.entryDir == "" {
		return nil, nil
	}
	r.repairMu.Lock()
	defer r.repairMu.Unlock()
	return scanEntries(r.entryDir, repair)
}

// ModuleKey returns a hash that, fed a payload, sums to the key of the payload's compiled form in
// the cache (wazero's module ID), so that a caller streaming the payload anyway can ask
// HasCompiled without a second pass over it.
func (r *Runner) ModuleKey() hash.Hash { return newModuleKey(true) }

// HasCompiled reports whether the compiled cache holds a whole entry under key (from ModuleKey),
// by a few small reads and without decoding anything.
func (r *Runner) HasCompiled(key []byte) bool {
	if r.entryDir == "" {
		return false
	}
	return checkEntry(filepath.Join(r.entryDir, entryNameOf(key)), wazeroVersion(), true) == nil
}

// CacheInUse reports whether runs use the compiled cache folder.
func (r *Runner) CacheInUse() bool { return r.entryDir != "" }

// PayloadDir is where decompressed payloads may be kept beside their compiled forms, so that
// a warm start need not inflate the payload again; "" when the compiled cache is not in use,
// because a folder not trusted with compiled code is not trusted with payloads either.
func (r *Runner) PayloadDir() string {
	if !r.CacheInUse() {
		return ""
	}
	return PayloadDir(r.opt.CacheDir)
}
