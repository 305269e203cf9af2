// rusage runs a command and writes what the kernel accounted to it, as JSON, to a file: its peak
// resident memory (ru_maxrss) and its CPU, user and system. The benchmarks start mur through it
// because Linux carries a parent's memory high-water mark into a child it forks and execs
// (exec_mmap records the old mm's peak in the child's maxrss), so mur started straight from the
// test process would report that process's peak, not its own. Started from here, mur inherits
// only this small program's peak, which is written beside the figure (launcher_maxrss_kib) so the
// caller can check it is not what it measured.
//
// Usage: rusage [-jobs N -each FILE] OUT.json PROGRAM [ARG...]. The program inherits the standard
// streams, folder and environment, and rusage exits with its status. With -each, PROGRAM runs once
// per line of FILE, the line's words appended to its arguments, N at a time, each started
// directly (no shell), as `xargs -P N` would; the report sums their CPU and keeps the largest peak.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

type report struct {
	MaxRSSKiB         int64 `json:"maxrss_kib"`
	UserMicros        int64 `json:"user_us"`
	SysMicros         int64 `json:"sys_us"`
	LauncherMaxRSSKiB int64 `json:"launcher_maxrss_kib"`
}

func main() {
	jobs := flag.Int("jobs", 1, "how many runs of -each at once")
	each := flag.String("each", "", "a file of argument lines: run the program once per line")
	flag.Parse()
	if flag.NArg() < 2 {
		fmt.Fprintln(os.Stderr, "usage: rusage [-jobs N -each FILE] OUT.json PROGRAM [ARG...]")
		os.Exit(2)
	}
	out, argv := flag.Arg(0), flag.Args()[1:]
	r := report{LauncherMaxRSSKiB: ownPeakKiB()}
	code := 0
	if *each == "" {
		code = run(exec.Command(argv[0], argv[1:]...), &r, nil)
	} else {
		code = runEach(argv, *each, *jobs, &r)
	}
	raw, _ := json.Marshal(r)
	if err := os.WriteFile(out, raw, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

var mu sync.Mutex

// run runs c and adds its usage to r; with collect set, c's output goes there instead of to the
// standard streams. It returns c's exit status.
func run(c *exec.Cmd, r *report, collect *bytes.Buffer) int {
	if collect != nil {
		c.Stdout, c.Stderr = collect, collect
	} else {
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	}
	err := c.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	mu.Lock()
	defer mu.Unlock()
	r.MaxRSSKiB = max(r.MaxRSSKiB, ru.Maxrss)
	r.UserMicros += ru.Utime.Nano() / 1000
	r.SysMicros += ru.Stime.Nano() / 1000
	return c.ProcessState.ExitCode()
}

// runEach runs argv once per line of file, jobs at a time; a run that fails has its output
// printed, and the status is then 1.
func runEach(argv []string, file string, jobs int, r *report) int {
	lines, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	code := 0
	for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var out bytes.Buffer
			args := append(append([]string{}, argv[1:]...), strings.Fields(l)...)
			if run(exec.Command(argv[0], args...), r, &out) != 0 {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(os.Stderr, "%s %s failed:\n%s", argv[0], strings.Join(args, " "), out.String())
				code = 1
			}
		}()
	}
	wg.Wait()
	return code
}

// ownPeakKiB is this process's memory high-water mark (VmHWM), what a child's maxrss starts from.
func ownPeakKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb
			}
		}
	}
	return -1
}
