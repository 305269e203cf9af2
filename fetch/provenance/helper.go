package provenance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// HelperName is the executable that verifies and signs bundles for mur.
const HelperName = "mur-provenance"

// Request is one line mur writes to mur-provenance's standard input.
type Request struct {
	Op     string        `json:"op"` // "verify" or "sign"
	Bundle []byte        `json:"bundle,omitempty"`
	Digest digest.Digest `json:"digest"`
	Expect Expect        `json:"expect,omitempty"`
	Trust  Trust         `json:"trust,omitempty"`
	Key    []byte        `json:"key,omitempty"` // the PEM of a signing key
	SHA512 []byte        `json:"sha512,omitempty"`
}

// Response is the line mur-provenance answers each Request with. Token and Msg carry an error
// with its token, so that it reaches the user exactly as if it had been raised in process.
type Response struct {
	Facts  *Facts `json:"facts,omitempty"`
	Bundle []byte `json:"bundle,omitempty"`
	Hint   string `json:"hint,omitempty"`
	Token  string `json:"token,omitempty"`
	Msg    string `json:"msg,omitempty"`
}

// Err is the response's error, or nil.
func (r Response) Err() error {
	if r.Token == "" {
		return nil
	}
	return errs.New(errs.Token(r.Token), "%s", r.Msg)
}

// ErrorResponse is the Response that carries err.
func ErrorResponse(err error) Response {
	return Response{Token: string(errs.TokenOf(err)), Msg: errs.Message(err)}
}

// Helper is a Verifier and Signer that runs mur-provenance, once per command and only when a
// bundle has to be checked, and talks to it in JSON lines. It is safe for concurrent use; the
// requests are answered one at a time, which costs little next to a download.
type Helper struct {
	// Path is the executable; "" finds it with FindHelper.
	Path string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	broken error
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
	return "", errs.New(errs.ProvenanceUnverifiable, "%s is not installed beside mur or on PATH, so this provenance bundle can't be checked; install it with mur (go install github.com/murmur-nexus/mur/cmd/...), or set MUR_PROVENANCE_HELPER", HelperName)
}

// Verify implements Verifier.
func (h *Helper) Verify(ctx context.Context, bundle []byte, artifact digest.Digest, want Expect, trust Trust) (Facts, error) {
	resp, err := h.call(ctx, Request{Op: "verify", Bundle: bundle, Digest: artifact, Expect: want, Trust: trust})
	if err != nil {
		return Facts{}, err
	}
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
	if h.cmd == nil {
		if err := h.start(); err != nil {
			return Response{}, err
		}
	}
	line, err := json.Marshal(req)
	if err != nil {
		return Response{}, errs.Wrap(err, errs.Internal, "provenance request: %v", err)
	}
	if _, err := h.stdin.Write(append(line, '\n')); err != nil {
		return Response{}, h.fail(err)
	}
	answer, err := h.stdout.ReadBytes('\n')
	if err != nil {
		return Response{}, h.fail(err)
	}
	var resp Response
	if err := json.Unmarshal(answer, &resp); err != nil {
		return Response{}, h.fail(err)
	}
	return resp, nil
}

func (h *Helper) start() error {
	path := h.Path
	if path == "" {
		var err error
		if path, err = FindHelper(); err != nil {
			h.broken = err
			return err
		}
	}
	cmd := exec.Command(path)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return h.fail(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return h.fail(err)
	}
	if err := cmd.Start(); err != nil {
		return h.fail(err)
	}
	h.cmd, h.stdin, h.stdout = cmd, in, bufio.NewReaderSize(out, 64<<10)
	return nil
}

// fail marks the helper unusable: a verification that can't be done fails closed, for this
// and every later bundle of the command.
func (h *Helper) fail(cause error) error {
	h.broken = errs.Wrap(cause, errs.ProvenanceUnverifiable, "%s failed (%v), so no provenance bundle can be checked; nothing was accepted unverified", HelperName, cause)
	return h.broken
}

// Close ends the helper process, if one was started.
func (h *Helper) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil {
		return nil
	}
	h.stdin.Close()
	err := h.cmd.Wait()
	h.cmd = nil
	if h.broken == nil {
		h.broken = errors.New("closed")
	}
	return err
}
