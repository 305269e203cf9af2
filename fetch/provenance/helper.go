package provenance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// HelperName is the executable that verifies and signs bundles for mur.
const HelperName = "mur-provenance"

// Protocol is the version of the JSON lines mur and mur-provenance exchange. It changes with
// every change to the shape of a Request or a Response: a field that one side drops unread may
// be a policy the other meant to enforce, so each side refuses a peer of another version
// instead of guessing.
const Protocol = 3

// DefaultTimeout bounds each exchange with mur-provenance when Helper.Timeout is zero. A verify
// takes milliseconds; the bound is for a helper that hangs, which must fail the command rather
// than stall it forever.
const DefaultTimeout = 30 * time.Second

// closeGrace is how long Close lets the helper exit by itself once its input has ended.
const closeGrace = 2 * time.Second

// maxAnswer bounds one line of the helper's answer: a signed bundle is a few KB.
const maxAnswer = 16 << 20

// Request is one line mur writes to mur-provenance's standard input.
type Request struct {
	Op       string        `json:"op"`                 // "hello" first, then "verify", "sign", "refresh-roots" or "show-roots"
	Protocol int           `json:"protocol,omitempty"` // hello: the Protocol mur speaks
	Bundle   []byte        `json:"bundle,omitempty"`
	Digest   digest.Digest `json:"digest"`
	Expect   Expect        `json:"expect,omitempty"`
	Trust    Trust         `json:"trust,omitempty"`
	Key      []byte        `json:"key,omitempty"` // the PEM of a signing key
	SHA512   []byte        `json:"sha512,omitempty"`
	// Roots is where the trusted roots refreshed through TUF are kept: verify, refresh-roots
	// and show-roots.
	Roots *RootsCache `json:"roots,omitempty"`
}

// Response is the line mur-provenance answers each Request with. Token and Msg carry an error
// with its token, so that it reaches the user exactly as if it had been raised in process.
type Response struct {
	Protocol int    `json:"protocol,omitempty"` // hello: the Protocol the helper speaks
	Version  string `json:"version,omitempty"`  // hello: the helper's build, for messages
	Facts    *Facts `json:"facts,omitempty"`
	Bundle   []byte `json:"bundle,omitempty"`
	Hint     string `json:"hint,omitempty"`
	Token    string `json:"token,omitempty"`
	Msg      string `json:"msg,omitempty"`
	// Unanchored names the signer of a bundle that nothing trusted anchors (an unknown key, an
	// unknown certificate authority): such a bundle proves nothing, which a pull under prefer
	// treats as no bundle at all (Unanchored).
	Unanchored string `json:"unanchored,omitempty"`
	// Roots: refresh-roots and show-roots, one status per instance.
	Roots []RootStatus `json:"roots,omitempty"`
	// Notes are warnings for the user, such as a refresh of the trusted roots that failed; a
	// verify still answers as usual.
	Notes []string `json:"notes,omitempty"`
}

// Err is the response's error, or nil.
func (r Response) Err() error {
	if r.Token == "" {
		return nil
	}
	if r.Unanchored != "" {
		return errs.Wrap(&Unanchored{Signer: r.Unanchored}, errs.Token(r.Token), "%s", r.Msg)
	}
	return errs.New(errs.Token(r.Token), "%s", r.Msg)
}

// ErrorResponse is the Response that carries err.
func ErrorResponse(err error) Response {
	r := Response{Token: string(errs.TokenOf(err)), Msg: errs.Message(err)}
	var u *Unanchored
	if errors.As(err, &u) {
		r.Unanchored = u.Signer
	}
	return r
}

// Unanchored is the cause of a verification that failed because nothing trusted anchors the
// bundle's signer: its key is in no trusted_keys entry, or its certificate chains to no trusted
// root. Such a bundle proves nothing either way, unlike one whose anchored signer names other
// bytes, another owner or another workflow (provenance-mismatch).
type Unanchored struct {
	Signer string // the key's hint, or the certificate authority's name
}

func (u *Unanchored) Error() string { return "signer " + u.Signer + " is anchored by nothing trusted" }

// Helper is a Verifier and Signer that runs mur-provenance, once per command and only when a
// bundle has to be checked, and talks to it in JSON lines. It is safe for concurrent use; the
// requests are answered one at a time, which costs little next to a download.
type Helper struct {
	// Path is the executable; "" finds it with FindHelper.
	Path string
	// Timeout bounds each exchange, a request and its answer; 0 is DefaultTimeout.
	Timeout time.Duration
	// Roots, when set, goes with every verify: the helper then checks attestations against the
	// roots it refreshes through TUF (at most daily) and caches there.
	Roots *RootsCache
	// Warn receives the helper's notes, each once per Helper; nil drops them.
	Warn func(msg string)
	// Stderr receives the helper's standard error, escaped for a terminal and cut after
	// maxStderr bytes; nil is os.Stderr.
	Stderr io.Writer

	mu     sync.Mutex
	proc   *process // nil until the first request, and again after an interrupted one
	broken error
	noted  map[string]bool // the notes Warn has had
}

// process is one running mur-provenance. Its pipes are os.Pipe files, which take deadlines,
// so that neither a helper that stops reading nor one that never answers can block mur.
type process struct {
	path   string
	cmd    *exec.Cmd
	in     *os.File // mur's end of the helper's standard input
	out    *os.File // mur's end of the helper's standard output
	r      *bufio.Reader
	exited chan struct{} // closed once the process is reaped
}

// FindHelper is $MUR_PROVENANCE_HELPER, else mur-provenance beside the running executable, else
// on PATH.
func FindHelper() (string, error) {
	if p := os.Getenv("MUR_PROVENANCE_HELPER"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), HelperName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(HelperName); err == nil {
		return p, nil
	}
	return "", errs.New(errs.ProvenanceUnverifiable, "%s is not installed beside mur or on PATH, so this provenance bundle can't be checked; install it with %s", HelperName, InstallHint(BuildVersion()))
}

// Verify implements Verifier.
func (h *Helper) Verify(ctx context.Context, bundle []byte, artifact digest.Digest, want Expect, trust Trust) (Facts, error) {
	resp, err := h.call(ctx, Request{Op: "verify", Bundle: bundle, Digest: artifact, Expect: want, Trust: trust, Roots: h.Roots})
	if err != nil {
		return Facts{}, err
	}
	h.note(resp.Notes)
	if err := resp.Err(); err != nil {
		return Facts{}, err
	}
	if resp.Facts == nil {
		return Facts{}, errs.New(errs.Internal, "%s answered without facts", HelperName)
	}
	return *resp.Facts, nil
}

// Sign implements Signer.
func (h *Helper) Sign(ctx context.Context, keyPEM []byte, artifact digest.Digest, sha512 []byte) ([]byte, string, error) {
	resp, err := h.call(ctx, Request{Op: "sign", Key: keyPEM, Digest: artifact, SHA512: sha512})
	if err != nil {
		return nil, "", err
	}
	if err := resp.Err(); err != nil {
		return nil, "", err
	}
	return resp.Bundle, resp.Hint, nil
}

func (h *Helper) call(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken != nil {
		return Response{}, h.broken
	}
	if h.proc == nil {
		if err := h.start(ctx); err != nil {
			return Response{}, err
		}
	}
	answer, err := h.exchange(ctx, req)
	if err != nil {
		return Response{}, err
	}
	var resp Response
	if err := strictUnmarshal(answer, &resp); err != nil {
		return Response{}, h.fail(fmt.Errorf("an answer mur can't read: %w", err))
	}
	return resp, nil
}

// strictUnmarshal refuses fields Response does not know: the helper speaks the same Protocol, so
// an unknown field means the two disagree on what an answer says.
func strictUnmarshal(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value on a line")
	}
	return nil
}

func (h *Helper) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return DefaultTimeout
}

// start runs the helper and agrees on the protocol with it before any request is sent.
func (h *Helper) start(ctx context.Context) error {
	path := h.Path
	if path == "" {
		var err error
		if path, err = FindHelper(); err != nil {
			h.broken = err
			return err
		}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return h.fail(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return h.fail(err)
	}
	cmd := exec.Command(path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, newStderrSink(h.Stderr)
	// The helper's standard error is copied by a goroutine that Wait waits for; a process the
	// helper left holding the pipe must not hold up its reaping for longer than this.
	cmd.WaitDelay = closeGrace
	err = cmd.Start()
	// The child holds its own copies; mur's must go, or the helper's exit would never reach
	// mur as the end of its output.
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return h.fail(err)
	}
	p := &process{path: path, cmd: cmd, in: inW, out: outR, r: bufio.NewReaderSize(outR, 64<<10), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	h.proc = p

	answer, err := h.exchange(ctx, Request{Op: "hello", Protocol: Protocol})
	if err != nil {
		return err
	}
	// The version is read leniently: a helper of another protocol may answer in another shape,
	// and the user needs to hear which versions disagree rather than which field was unknown.
	var peek struct {
		Protocol int    `json:"protocol"`
		Version  string `json:"version"`
	}
	if json.Unmarshal(answer, &peek) != nil || peek.Protocol != Protocol {
		return h.refuse(p.path, peek.Protocol, peek.Version)
	}
	var hello Response
	if err := strictUnmarshal(answer, &hello); err != nil {
		return h.fail(fmt.Errorf("a hello mur can't read: %w", err))
	}
	return nil
}

// refuse fails the helper for speaking another protocol than this mur.
func (h *Helper) refuse(path string, found int, build string) error {
	foundStr, theirs := "none", "an older build, which states no protocol"
	if found != 0 {
		foundStr, theirs = strconv.Itoa(found), describeBuild(build)
	}
	mine := BuildVersion()
	h.broken = errs.New(errs.ProvenanceUnverifiable, "%s at %s (%s) does not speak the helper protocol of this mur (%s): expected protocol %d, found %s; no provenance bundle can be checked, and nothing was accepted unverified. Install the %s of this mur's version: %s",
		HelperName, path, theirs, describeBuild(mine), Protocol, foundStr, HelperName, InstallHint(mine))
	h.stop()
	return h.broken
}

// exchange writes req and reads one answer line, within the timeout. Cancelling ctx ends the
// wait at once: the helper is stopped, since its answer would arrive out of turn, and the next
// request starts a new one.
func (h *Helper) exchange(ctx context.Context, req Request) ([]byte, error) {
	p := h.proc
	line, err := json.Marshal(req)
	if err != nil {
		return nil, errs.Wrap(err, errs.Internal, "provenance request: %v", err)
	}
	deadline := time.Now().Add(h.timeout())
	p.in.SetWriteDeadline(deadline)
	p.out.SetReadDeadline(deadline)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		p.in.SetWriteDeadline(time.Unix(1, 0))
		p.out.SetReadDeadline(time.Unix(1, 0))
		close(fired)
	})
	defer func() {
		// A cancellation that raced the answer must be done moving the deadlines before the
		// next exchange sets its own.
		if !stop() {
			<-fired
		}
	}()
	var answer []byte
	_, err = p.in.Write(append(line, '\n'))
	if err == nil {
		answer, err = p.readLine()
	}
	switch {
	case err == nil:
		return answer, nil
	case ctx.Err() != nil:
		h.stop()
		return nil, ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, h.fail(fmt.Errorf("it did not answer within %s", h.timeout()))
	case errors.Is(err, io.EOF), errors.Is(err, syscall.EPIPE):
		return nil, h.fail(fmt.Errorf("it ended without answering: %w", err))
	}
	return nil, h.fail(err)
}

func (p *process) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := p.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxAnswer {
			return nil, fmt.Errorf("it answered a line of more than %d bytes", maxAnswer)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		}
		return nil, err
	}
}

// fail marks the helper unusable and stops it: a verification that can't be done fails closed,
// for this and every later bundle of the command.
func (h *Helper) fail(cause error) error {
	h.broken = errs.Wrap(cause, errs.ProvenanceUnverifiable, "%s failed (%v), so no provenance bundle can be checked; nothing was accepted unverified", HelperName, cause)
	h.stop()
	return h.broken
}

// stop kills the helper at once, if one runs, and reaps it.
func (h *Helper) stop() {
	p := h.proc
	if p == nil {
		return
	}
	h.proc = nil
	p.cmd.Process.Kill()
	<-p.exited
	p.in.Close()
	p.out.Close()
}

// Close ends the helper process, if one was started: it closes the helper's input, which ends
// a helper that works, and kills one that has not exited within a short grace.
func (h *Helper) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken == nil {
		h.broken = errs.New(errs.Internal, "%s was used after Close", HelperName)
	}
	p := h.proc
	if p == nil {
		return nil
	}
	p.in.Close()
	grace := time.NewTimer(closeGrace)
	defer grace.Stop()
	select {
	case <-p.exited:
		h.proc = nil
		p.out.Close()
		if !p.cmd.ProcessState.Success() {
			return fmt.Errorf("%s ended with %v", HelperName, p.cmd.ProcessState)
		}
		return nil
	case <-grace.C:
	}
	h.stop()
	return fmt.Errorf("%s did not exit within %s of its input ending, and was killed", HelperName, closeGrace)
}
