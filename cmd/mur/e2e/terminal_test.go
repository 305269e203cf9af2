package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
)

// What a hostile server or publisher slips into text mur prints: OSC 52 (writes the clipboard
// in tmux and most terminals), ESC[2J (clears the screen) and a bare \r (rewrites the line).
const (
	hostileText = "pwned\x1b]52;c;aGFja2Vk\x07 \x1b[2J\rmur: all good"
	osc52       = "\x1b]52"
	clearScreen = "\x1b[2J"
)

// ptyRun runs c with a pseudo-terminal as its stdin, stdout and stderr, and returns what the
// terminal received.
func ptyRun(t *testing.T, c *exec.Cmd) string {
	t.Helper()
	ptmx, err := pty.StartWithSize(c, &pty.Winsize{Cols: 120, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = io.Copy(&out, ptmx)
	ptmx.Close()
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading the terminal: %v", err)
	}
	c.Wait()
	return out.String()
}

// hostileSetups are three worlds whose pull meets hostileText: from a registry's error body,
// from a GitHub API message, and from a packed murmur.yaml. Each returns the pull's arguments.
func hostileSetups(t *testing.T) map[string]func(w *world) []string {
	return map[string]func(w *world) []string{
		"registry": func(w *world) []string {
			reg := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusBadRequest)
				io.WriteString(rw, `{"errors":[{"code":"UNSUPPORTED","message":"`+jsonString(hostileText)+`"}]}`)
			}))
			t.Cleanup(reg.Close)
			w.stores("oci://" + strings.TrimPrefix(reg.URL, "http://") + "/murmur")
			w.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
			return []string{"pull"}
		},
		"github": func(w *world) []string {
			gh := githubtest.New(t)
			gh.AlwaysFail(http.StatusForbidden)
			gh.FailMessage(hostileText)
			w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
			w.write("murmur.yaml", sourceCapsule("sources", "acme/hello@1.0.0"))
			return []string{"pull"}
		},
		"layout path": func(w *world) []string {
			w.write(".murmur/config.yaml", "stores: [\"oci-layout:./"+yamlEscape(hostileText)+"\"]\n")
			w.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
			return []string{"pull"}
		},
		"packed murmur.yaml": func(w *world) []string {
			var b bytes.Buffer
			zw := zip.NewWriter(&b)
			f, _ := zw.Create("murmur.yaml")
			io.WriteString(f, "name: \""+yamlEscape(hostileText)+"\"\nversion: 1.0.0\n\""+yamlEscape(hostileText)+"\": 1\n")
			f, _ = zw.Create("capsule.wasm")
			f.Write([]byte("\x00asm\x01\x00\x00\x00"))
			zw.Close()
			p := filepath.Join(w.project, "evil.mur.zip")
			if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			w.write("murmur.yaml", capsuleYAML())
			return []string{"pull", "./evil.mur.zip"}
		},
	}
}

func jsonString(s string) string {
	r := strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`, "\r", `\r`)
	return r.Replace(s)
}

func yamlEscape(s string) string {
	r := strings.NewReplacer("\x1b", `\e`, "\x07", `\a`, "\r", `\r`)
	return r.Replace(s)
}

// No byte a registry, a GitHub server or a packed murmur.yaml sent drives the terminal: through
// a pipe no ESC, BEL or CR reaches stdout or stderr at all, with --json too; on a terminal the
// hostile sequences arrive escaped, while mur's own progress display still draws.
func TestHostileTextNeverReachesTheTerminal(t *testing.T) {
	t.Parallel()
	for name, setup := range hostileSetups(t) {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			args := setup(w)
			r := w.mur(args...)
			if r.code == 0 {
				t.Fatalf("the hostile pull succeeded: %s", r)
			}
			out := r.stdout + r.stderr
			if i := strings.IndexAny(out, "\x1b\x07\r"); i >= 0 {
				t.Fatalf("a raw control byte %q reached a pipe at %d:\n%q", out[i], i, out)
			}
			if name != "packed murmur.yaml" && !strings.Contains(out, `\x1b]52;c;aGFja2Vk`) {
				t.Fatalf("the server's message is not shown, escaped:\n%q", out)
			}
			j := w.mur(append(args, "--json")...)
			if i := strings.IndexAny(j.stdout+j.stderr, "\x1b\x07\r"); i >= 0 {
				t.Fatalf("a raw control byte reached a pipe with --json:\n%q", j.stdout+j.stderr)
			}
			term := ptyRun(t, w.cmd(args...))
			if strings.Contains(term, osc52) || strings.Contains(term, clearScreen) {
				t.Fatalf("the terminal received the hostile sequences raw:\n%q", term)
			}
			if name != "packed murmur.yaml" && !strings.Contains(term, `\x1b]52;c;aGFja2Vk`) {
				t.Fatalf("the terminal does not show the server's message, escaped:\n%q", term)
			}
		})
	}
}
