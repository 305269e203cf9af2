//go:build unix

package provenance_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// The test binary doubles as mur-provenance: re-executed with ATTEST_TEST_HELPER set, it serves,
// or stands in for a helper that misbehaves in the way the mode names.
func TestMain(m *testing.M) {
	switch mode := os.Getenv("ATTEST_TEST_HELPER"); mode {
	case "":
		os.Exit(m.Run())
	case "serve":
		if err := sigstore.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case "crash":
		os.Exit(3)
	default:
		standIn(mode)
		os.Exit(0)
	}
}

const helloOK = `{"protocol":3,"version":"test"}`

// standIn is a mur-provenance that gets the protocol wrong, or never answers, or never exits.
// It writes its pid to $ATTEST_TEST_MARK when it starts, and "asked" once a request past the
// hello has reached it, for tests that wait on either.
func standIn(mode string) {
	mark := os.Getenv("ATTEST_TEST_MARK")
	if mark != "" {
		os.WriteFile(mark+".pid", []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 64<<20)
	answer := func(s string) { os.Stdout.WriteString(s + "\n") }
	// Longer than any test waits, and bounded, so that a test that dies leaves no stand-in
	// running for long.
	forever := func() { time.Sleep(10 * time.Minute) }
	switch mode {
	case "silent": // reads every request and answers none, not even the hello
		io.Copy(io.Discard, os.Stdin)
		return
	case "deaf": // answers the hello, then reads nothing more and never exits
		sc.Scan()
		answer(helloOK)
		forever()
	}
	for n := 0; sc.Scan(); n++ {
		if n == 1 && mark != "" {
			os.WriteFile(mark+".asked", nil, 0o644)
		}
		switch {
		case mode == "old": // the helper before the protocol had a version
			answer(`{"token":"internal","msg":"mur-provenance: unknown op \"hello\""}`)
		case mode == "noproto":
			answer(`{"version":"v0.1.0"}`)
		case mode == "garbage":
			answer(`mur-provenance 0.1`)
		case mode == "hello-extra" && n == 0: // the right protocol, in a shape this mur does not know
			answer(`{"protocol":3,"version":"test","surprise":true}`)
		case mode == "hello-extra":
			answer(`{"facts":{"kind":"key","signer":"x"}}`)
		case mode == "future":
			answer(`{"protocol":4,"version":"v9.9.9","features":["attest-v3"]}`)
		case n == 0:
			answer(helloOK)
		case mode == "notes":
			answer(`{"facts":{"kind":"github-attestation","signer":"x"},"notes":["github's roots were not refreshed"]}`)
		case mode == "roots":
			answer(`{"roots":[{"instance":"github","source":"cache","summary":"1 CA","changed":false,"error":"down"}],"token":"network","msg":"github's TUF repository can't be reached"}`)
		case mode == "no-roots":
			answer(`{}`)
		case mode == "mute": // answers the hello only
		case mode == "extra":
			answer(`{"facts":{"kind":"key","signer":"x"},"surprise":true}`)
		case mode == "stubborn":
			answer(`{"token":"provenance-mismatch","msg":"no"}`)
		}
	}
	if mode == "stubborn" { // its input has ended, and it stays
		forever()
	}
}

func helper(t *testing.T, mode string) *provenance.Helper {
	t.Setenv("ATTEST_TEST_HELPER", mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := &provenance.Helper{Path: exe}
	t.Cleanup(func() { h.Close() })
	return h
}

// marked sets the stand-in's mark file, and returns its path.
func marked(t *testing.T) string {
	mark := filepath.Join(t.TempDir(), "mark")
	t.Setenv("ATTEST_TEST_MARK", mark)
	return mark
}

const (
	realSubject = digest.Digest("sha256:07e4b8c0e3580b3e4a1eb62c70f1ffb86004d3d94f50767cb404fa7a639b4d05")
)

func realBundle(t *testing.T) []byte {
	b, err := os.ReadFile("sigstore/testdata/github-attestation.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func realExpect() provenance.Expect {
	return provenance.Expect{Artifact: "malancas/demo@0.0.0", Scope: "malancas", OwnerID: 16248153, RepoID: 804070735}
}

func TestHelperVerifiesInItsOwnProcess(t *testing.T) {
	h := helper(t, "serve")
	want := realExpect()
	facts, err := h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{})
	if err != nil {
		t.Fatal(err)
	}
	if facts.OwnerID != 16248153 || facts.Repository != "malancas/attest-demo" {
		t.Fatalf("facts = %+v", facts)
	}
	// The error of a refused bundle keeps its token across the process boundary, and the
	// same helper answers the next request.
	want.OwnerID = 1
	_, err = h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{})
	if !errors.Is(err, errs.ProvenanceMismatch) || !strings.Contains(err.Error(), "murmur.lock pins owner 1,") {
		t.Fatalf("err = %v", err)
	}
	if _, err := h.Verify(context.Background(), realBundle(t), realSubject, want, provenance.Trust{RootFile: "/nonexistent/root.json"}); !errors.Is(err, errs.InvalidConfig) {
		t.Fatalf("missing trusted_root: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestHelperFailsClosed(t *testing.T) {
	h := helper(t, "crash")
	for i := 0; i < 2; i++ {
		if _, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{}); !errors.Is(err, errs.ProvenanceUnverifiable) {
			t.Fatalf("crashed helper, try %d: %v", i, err)
		}
	}
	missing := &provenance.Helper{Path: t.TempDir() + "/mur-provenance"}
	if _, err := missing.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{}); !errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("missing helper: %v", err)
	}
}

// A helper of another protocol version is refused before any bundle reaches it, with both
// versions named and how to install the matching one.
func TestHelperRefusesAnotherProtocol(t *testing.T) {
	for mode, found := range map[string]string{
		"old":     "found none",
		"noproto": "found none",
		"garbage": "found none",
		"future":  `found 4`,
	} {
		t.Run(mode, func(t *testing.T) {
			h := helper(t, mode)
			_, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{})
			errtest.WantToken(t, err, errs.ProvenanceUnverifiable, "expected protocol 3, "+found,
				"go install github.com/murmur-nexus/mur/cmd/...", "make build", "beside its own executable", "on PATH", "nothing was accepted unverified")
			if mode == "future" && !strings.Contains(err.Error(), `build "v9.9.9"`) {
				t.Errorf("the error does not name the helper's build: %v", err)
			}
			// Refused once, refused for the rest of the command, without asking again.
			if _, _, again := h.Sign(context.Background(), nil, realSubject, nil); again == nil || again.Error() != err.Error() {
				t.Fatalf("second request: %v", again)
			}
		})
	}
}

// Answers are read strictly too: a field mur does not know means the two disagree on what an
// answer says, and nothing is taken from it.
func TestHelperReadsAnswersStrictly(t *testing.T) {
	for _, mode := range []string{"hello-extra", "extra"} {
		t.Run(mode, func(t *testing.T) {
			h := helper(t, mode)
			_, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{})
			errtest.WantToken(t, err, errs.ProvenanceUnverifiable, `unknown field "surprise"`)
		})
	}
}

// A helper that never answers ends the call by itself, within the timeout: one that reads
// and answers nothing, not even the hello; one that answers the hello and then nothing; and one
// that stops reading, so that a large request can't even be written.
func TestHelperThatNeverAnswers(t *testing.T) {
	big := make([]byte, 4<<20)
	for mode, bundle := range map[string][]byte{"silent": realBundle(t), "mute": realBundle(t), "deaf": big} {
		t.Run(mode, func(t *testing.T) {
			mark := marked(t)
			h := helper(t, mode)
			// The timeout covers the stand-in's start, which a loaded machine can stretch past 2s
			// before it writes its pid; the margin stretches with MUR_TEST_SLOWDOWN.
			h.Timeout = slowdown.Scale(2 * time.Second)
			start := time.Now()
			_, err := h.Verify(context.Background(), bundle, realSubject, realExpect(), provenance.Trust{})
			errtest.WantToken(t, err, errs.ProvenanceUnverifiable, fmt.Sprintf("did not answer within %s", h.Timeout))
			if d := time.Since(start); d > time.Minute {
				t.Fatalf("the call took %s", d)
			}
			// Given up on, it is stopped then, not left to run until Close.
			if pid := readPID(t, mark); syscall.Kill(pid, 0) == nil {
				t.Fatalf("the helper (pid %d) still runs", pid)
			}
			if _, again := h.Verify(context.Background(), bundle, realSubject, realExpect(), provenance.Trust{}); !errors.Is(again, errs.ProvenanceUnverifiable) {
				t.Fatalf("second request: %v", again)
			}
		})
	}
}

// Ctrl-C ends the wait for an answer at once, whatever the timeout, with the context's error;
// the helper is stopped, since its answer would come out of turn, and the next request starts
// another.
func TestHelperInterrupted(t *testing.T) {
	mark := marked(t)
	h := helper(t, "mute")
	// Only the timeout could end the wait without the cancellation, and far later than any
	// machine takes to notice one.
	h.Timeout = 2 * time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan time.Time, 1)
	go func() {
		// Waits for the event, the request reaching the helper, not for a guessed time.
		for {
			if _, err := os.Stat(mark + ".asked"); err == nil {
				canceled <- time.Now()
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := h.Verify(ctx, realBundle(t), realSubject, realExpect(), provenance.Trust{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("interrupted call: %v, want context.Canceled", err)
	}
	if d := time.Since(<-canceled); d > h.Timeout/2 {
		t.Fatalf("the call ended %s after the cancellation, as if by its timeout", d)
	}
	pid := readPID(t, mark)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the interrupted helper (pid %d) still runs: %v", pid, err)
	}
	t.Setenv("ATTEST_TEST_HELPER", "serve")
	if _, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{}); err != nil {
		t.Fatalf("the request after an interrupted one: %v", err)
	}
}

// Close ends a helper that does not exit when its input ends: it is killed after a short
// grace, and Close returns.
func TestHelperCloseKillsAHelperThatStays(t *testing.T) {
	mark := marked(t)
	h := helper(t, "stubborn")
	_, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{})
	errtest.WantToken(t, err, errs.ProvenanceMismatch)
	pid := readPID(t, mark)
	start := time.Now()
	err = h.Close()
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("Close took %s", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the helper (pid %d) still runs after Close: %v", pid, err)
	}
	if _, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{}); err == nil {
		t.Fatal("a closed helper answered")
	}
}

func readPID(t *testing.T, mark string) int {
	b, err := os.ReadFile(mark + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(fmt.Errorf("pid file: %w", err))
	}
	return pid
}

// A note the helper attaches to its answers (a refresh of the trusted roots that failed) reaches
// Warn once per command, however many bundles carry it.
func TestHelperSaysEachNoteOnce(t *testing.T) {
	h := helper(t, "notes")
	var said []string
	h.Warn = func(msg string) { said = append(said, msg) }
	for range 3 {
		if _, err := h.Verify(context.Background(), realBundle(t), realSubject, realExpect(), provenance.Trust{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(said) != 1 || said[0] != "github's roots were not refreshed" {
		t.Fatalf("notes said: %q", said)
	}
}

// A refresh reports every instance even when one failed, with the failure's token; an answer
// without statuses is refused rather than shown as nothing to report.
func TestHelperRefreshRoots(t *testing.T) {
	st, err := helper(t, "roots").RefreshRoots(context.Background(), provenance.RootsCache{Dir: t.TempDir()})
	errtest.WantToken(t, err, errs.Network, "can't be reached")
	if len(st) != 1 || st[0].Instance != "github" || st[0].Error != "down" {
		t.Fatalf("statuses: %+v", st)
	}
	_, err = helper(t, "no-roots").ShowRoots(context.Background(), provenance.RootsCache{Dir: t.TempDir()})
	errtest.WantToken(t, err, errs.Internal, "without a status of the roots")
}
