package cas

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// The tests below re-run the test binary as other processes, switched by this variable, so that
// several processes share one store for real.
const helperEnv = "MUR_CAS_TEST_HELPER"

func helperCmd(t *testing.T, role, root string, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(deadline.Context(t), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, "MUR_CAS_TEST_ROOT="+root)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestHelperProcess is not a test: it is the body of the helper processes.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		t.Skip("only runs as a helper process")
	}
	s, err := Open(os.Getenv("MUR_CAS_TEST_ROOT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	switch role {
	case "ingest":
		i, _ := strconv.Atoi(os.Getenv("MUR_CAS_TEST_INDEX"))
		for _, b := range concurrentBlobs(i) {
			for range 2 {
				d, err := s.Ingest(ctx, newPattern(b.seed, b.size), b.size, patternDigest(b.seed, b.size))
				if err != nil {
					fmt.Fprintf(os.Stderr, "helper %d: %v\n", i, err)
					os.Exit(4)
				}
				if err := s.AppendRecord(Record{Time: time.Now(), Ref: fmt.Sprintf("test/p%d", i), Digest: d, Size: b.size, Outcome: OutcomePulled}); err != nil {
					fmt.Fprintf(os.Stderr, "helper %d: %v\n", i, err)
					os.Exit(5)
				}
			}
		}
	case "lease":
		// Lease a digest, say so, and hold the lease until killed.
		l, err := s.NewLease(ctx)
		if err == nil {
			err = l.Add(ctx, digest.Digest(os.Getenv("MUR_CAS_TEST_DIGEST")))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(7)
		}
		fmt.Println("leased")
		select {}
	case "resumable-stall":
		// Write half of a large blob into a resumable ingest, say so, and hang until killed.
		d := patternDigest(killSeed, killSize)
		w, err := s.OpenResumable(ctx, ResumeInfo{Digest: d, Size: killSize, Store: "test"})
		if err == nil {
			_, err = w.ReadFrom(io.LimitReader(newPattern(killSeed, killSize), killSize/2))
		}
		if err == nil {
			err = w.Sync()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(8)
		}
		fmt.Print("halfway")
		select {}
	case "stall":
		// Ingest half of a large blob, then hang until killed.
		src := io.MultiReader(io.LimitReader(newPattern(killSeed, killSize), killSize/2), blockForever{})
		s.Ingest(ctx, src, killSize, "")
		os.Exit(6)
	}
	os.Exit(0)
}

type blockForever struct{}

func (blockForever) Read([]byte) (int, error) { select {} }

type blobSpec struct {
	seed uint64
	size int64
}

// concurrentBlobs is what helper i ingests: one blob every helper ingests, one it shares with a
// neighbour, and one of its own.
func concurrentBlobs(i int) []blobSpec {
	return []blobSpec{
		{seed: 1000, size: 6<<20 + 3},
		{seed: 2000 + uint64(i/2), size: 3<<20 + int64(i/2)},
		{seed: 3000 + uint64(i), size: 1<<20 + int64(i)*4097},
	}
}

func TestEightProcessesShareOneStore(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	const procs = 8
	var cmds []*exec.Cmd
	for i := range procs {
		cmd := helperCmd(t, "ingest", s.Root(), "MUR_CAS_TEST_INDEX="+strconv.Itoa(i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	want := map[digest.Digest]int64{}
	for i := range procs {
		for _, b := range concurrentBlobs(i) {
			want[patternDigest(b.seed, b.size)] = b.size
		}
	}
	if len(want) != 1+procs/2+procs {
		t.Fatalf("test bug: %d distinct blobs", len(want))
	}
	for d, size := range want {
		info, err := s.Stat(d)
		if err != nil || info.Size != size {
			t.Errorf("Stat(%s) = %+v, %v; want size %d", d, info, err, size)
		}
	}
	rep, err := s.VerifyAll(ctx, 0)
	if err != nil || len(rep.Damaged) != 0 || rep.Checked != len(want) {
		t.Fatalf("VerifyAll = %+v, %v", rep, err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
	recs, err := s.Records("")
	if err != nil || len(recs) != procs*3*2 {
		t.Fatalf("Records = %d, %v; want %d whole records", len(recs), err, procs*3*2)
	}
}

const (
	killSeed = 4242
	killSize = 256 << 20
)

func TestKillDuringIngest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams 256 MiB")
	}
	s := openStore(t)
	cmd := helperCmd(t, "stall", s.Root())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ingestDir := filepath.Join(s.Root(), "ingest")
	tmp := ""
	deadline := time.Now().Add(2 * time.Minute)
	for tmp == "" {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the helper's temporary file never grew past 64 MiB")
		}
		for _, name := range dirNames(t, ingestDir) {
			if fi, err := os.Stat(filepath.Join(ingestDir, name)); err == nil && fi.Size() >= 64<<20 {
				tmp = filepath.Join(ingestDir, name)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want killed by SIGKILL", err)
	}

	// Nothing partial is visible; the leftover sits in ingest/.
	if list, err := s.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after the kill = %v, %v", list, err)
	}
	if names := dirNames(t, ingestDir); len(names) != 1 || !strings.HasPrefix(names[0], ".mur-tmp-") {
		t.Fatalf("ingest/ holds %v, want the one leftover", names)
	}

	want := patternDigest(killSeed, killSize)
	d, err := s.Ingest(ctx, newPattern(killSeed, killSize), killSize, want)
	if err != nil || d != want {
		t.Fatalf("ingest after the kill = %s, %v", d, err)
	}
	rep, err := s.VerifyAll(ctx, 0)
	if err != nil || len(rep.Damaged) != 0 || rep.Checked != 1 || rep.Bytes != killSize {
		t.Fatalf("VerifyAll = %+v, %v", rep, err)
	}

	// GC removes the leftover once the grace has passed, since no process holds it.
	gc, err := s.GC(ctx, GCOptions{OlderThan: time.Hour, Now: time.Now().Add(IngestGrace + time.Second)})
	if err != nil || len(gc.Ingest) != 1 || gc.Ingest[0] != tmp || len(gc.Blobs) != 0 {
		t.Fatalf("GC = %+v, %v", gc, err)
	}
	if names := dirNames(t, ingestDir); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after GC", names)
	}
	if !s.Has(want) {
		t.Fatal("GC removed the fresh blob")
	}
}
