package e2e

import (
	"bufio"
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// The script commands of the command line's contract beyond exec: peers (oras, crane), a
// registry behind a made-up host name, a slow registry, an interrupt, a pseudo-terminal of a set
// width and the screen a terminal would show.
func init() {
	for name, cmd := range map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"hostproxy":   cmdHostProxy,
		"throttle":    cmdThrottle,
		"tlsregistry": cmdTLSRegistry,
		"bigguest":    cmdBigGuest,
		"trapguest":   cmdTrapGuest,
		"interrupt":   cmdInterrupt,
		"ptyexec":     cmdPtyExec,
		"screen":      cmdScreen,
	} {
		scriptCmds[name] = cmd
	}
}

// scriptCondition adds [peer:NAME]: whether the peer tool NAME (oras, crane) is on PATH.
// .ci/run installs them; outside CI a machine without them skips what needs them, and under CI
// their absence fails the script instead.
func scriptCondition(cond string) (bool, error) {
	name, ok := strings.CutPrefix(cond, "peer:")
	if !ok {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			return false, fmt.Errorf("%s is not on PATH, and CI is set: .ci/run installs it with go install", name)
		}
		return false, nil
	}
	return true, nil
}

// hostproxy VAR HOST ADDR: routes the script's HTTP(S) through a proxy that sends HOST:PORT to
// 127.0.0.1:PORT, the way an /etc/hosts entry or docker compose's DNS would, on any machine and
// without root; $VAR is HOST with ADDR's port. Each request it forwards is logged to
// $WORK/proxy.log, as "GET http://…" for plain HTTP and "CONNECT host:port" for HTTPS.
func cmdHostProxy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: hostproxy VAR HOST ADDR")
	}
	alias := args[1]
	_, port, err := net.SplitHostPort(args[2])
	ts.Check(err)
	ts.Setenv(args[0], net.JoinHostPort(alias, port))
	logPath := ts.MkAbs("proxy.log")
	var mu sync.Mutex
	logLine := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, s)
			f.Close()
		}
	}
	target := func(hostport string) string {
		host, port, err := net.SplitHostPort(hostport)
		if err == nil && host == alias {
			return net.JoinHostPort("127.0.0.1", port)
		}
		return hostport
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			logLine("CONNECT " + r.Host)
			up, err := net.Dial("tcp", target(r.Host))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			hj, _ := w.(http.Hijacker)
			conn, rw, err := hj.Hijack()
			if err != nil {
				up.Close()
				return
			}
			rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
			rw.Flush()
			go func() { io.Copy(up, rw); up.Close() }()
			io.Copy(conn, up)
			conn.Close()
			return
		}
		logLine(r.Method + " " + r.URL.String())
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Host = target(r.URL.Host)
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	ts.Defer(srv.Close)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		ts.Setenv(k, srv.URL)
	}
	ts.Setenv("NO_PROXY", "")
	ts.Setenv("no_proxy", "")
}

// throttle VAR ADDR BYTES_PER_SEC: a registry proxy in front of ADDR whose blob bodies over 2 MiB
// trickle, so that a script can interrupt a pull in the middle of a large blob while small ones
// finish; $VAR is its host:port.
func cmdThrottle(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: throttle VAR ADDR BYTES_PER_SEC")
	}
	rate, err := strconv.Atoi(args[2])
	ts.Check(err)
	u, err := url.Parse("http://" + args[1])
	ts.Check(err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(r *http.Response) error {
		if strings.Contains(r.Request.URL.Path, "/blobs/") && r.Request.Method == http.MethodGet && r.ContentLength > 2<<20 {
			r.Body = &slowBody{r: r.Body, rate: rate}
		}
		return nil
	}
	srv := httptest.NewServer(rp)
	ts.Defer(func() { srv.CloseClientConnections(); srv.Close() })
	ts.Setenv(args[0], strings.TrimPrefix(srv.URL, "http://"))
}

// tlsregistry VAR: an OCI registry over HTTPS on 127.0.0.1 with a certificate no system trusts;
// $VAR is its host:port, and $WORK/ca.pem the certificate to trust it with (SSL_CERT_FILE).
func cmdTLSRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tlsregistry VAR")
	}
	srv := httptest.NewUnstartedServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	ts.Defer(srv.Close)
	cert := srv.TLS.Certificates[0].Certificate[0]
	ts.Check(os.WriteFile(ts.MkAbs("ca.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}), 0o644))
	ts.Setenv(args[0], strings.TrimPrefix(srv.URL, "https://"))
}

// trapguest DIR: writes DIR/capsule.wasm, a valid module whose _start traps at once
// (unreachable), and DIR/murmur.yaml naming it trap 1.0.0: a run that crashes, of an artifact
// that passes every check.
func cmdTrapGuest(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: trapguest DIR")
	}
	section := func(id byte, body ...byte) []byte { return append([]byte{id, byte(len(body))}, body...) }
	mod := []byte("\x00asm\x01\x00\x00\x00")
	mod = append(mod, section(1, 1, 0x60, 0, 0)...)                                         // one type: () -> ()
	mod = append(mod, section(3, 1, 0)...)                                                  // one function of it
	mod = append(mod, section(7, append(append([]byte{1, 6}, "_start"...), 0x00, 0)...)...) // exported as _start
	mod = append(mod, section(10, 1, 3, 0, 0x00, 0x0b)...)                                  // no locals; unreachable; end
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(os.WriteFile(filepath.Join(dir, "capsule.wasm"), mod, 0o644))
	ts.Check(os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: trap\nversion: 1.0.0\n"), 0o644))
}

// bigguest DIR MIB [FUNCS]: writes DIR/capsule.wasm, a valid module carrying MIB MiB in a
// custom section (a payload large enough to interrupt its download) and FUNCS functions (enough
// code to keep a compile busy), and DIR/murmur.yaml naming it big 1.0.0.
func cmdBigGuest(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: bigguest DIR MIB [FUNCS]")
	}
	mib, err := strconv.Atoi(args[1])
	ts.Check(err)
	funcs := 0
	if len(args) == 3 {
		funcs, err = strconv.Atoi(args[2])
		ts.Check(err)
	}
	data := make([]byte, mib<<20)
	r := rand.New(rand.NewPCG(uint64(mib), 7))
	for i := range data {
		data[i] = byte(r.Uint32()) // incompressible, so the zip stays large
	}
	leb := func(n int) []byte {
		var out []byte
		for {
			b := byte(n & 0x7f)
			n >>= 7
			if n != 0 {
				out = append(out, b|0x80)
				continue
			}
			return append(out, b)
		}
	}
	sectionOf := func(id byte, body []byte) []byte {
		return append(append([]byte{id}, leb(len(body))...), body...)
	}
	mod := []byte("\x00asm\x01\x00\x00\x00")
	if funcs > 0 {
		mod = append(mod, sectionOf(1, []byte{1, 0x60, 0, 0})...) // one type: () -> ()
		fn := leb(funcs)
		for i := 0; i < funcs; i++ {
			fn = append(fn, 0)
		}
		mod = append(mod, sectionOf(3, fn)...)
		var body []byte
		body = append(body, 0) // no locals
		for i := 0; i < 40; i++ {
			body = append(body, 0x41, byte(i&0x3f), 0x41, 1, 0x6a, 0x1a) // i32.const, i32.const, i32.add, drop
		}
		body = append(body, 0x0b)
		code := leb(funcs)
		for i := 0; i < funcs; i++ {
			code = append(append(code, leb(len(body))...), body...)
		}
		mod = append(mod, sectionOf(10, code)...)
	}
	if mib > 0 {
		mod = append(mod, sectionOf(0, append(append(leb(1), 'x'), data...))...)
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	ts.Check(os.WriteFile(filepath.Join(dir, "capsule.wasm"), mod, 0o644))
	ts.Check(os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: big\nversion: 1.0.0\n"), 0o644))
}

// interrupt [-term] [-holdstdin] REGEXP prog args...: runs prog, sends it SIGINT (SIGTERM with
// -term) once its stderr matches REGEXP, and requires it to exit with status 130. -holdstdin
// gives prog a stdin that stays open and silent, as a terminal nobody types into. Its stdout and
// stderr are there for the lines that follow.
func cmdInterrupt(ts *testscript.TestScript, neg bool, args []string) {
	sig := syscall.SIGINT
	holdStdin := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-term":
			sig = syscall.SIGTERM
		case "-holdstdin":
			holdStdin = true
		default:
			ts.Fatalf("interrupt: unknown option %s", args[0])
		}
		args = args[1:]
	}
	if neg || len(args) < 2 {
		ts.Fatalf("usage: interrupt [-term] [-holdstdin] REGEXP program [args...]")
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	path, err := exec.LookPath(args[1])
	if err != nil {
		// PATH is the script's, not the test process's.
		for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
			if p := filepath.Join(dir, args[1]); fileExists(p) {
				path = p
				break
			}
		}
	}
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if holdStdin {
		in, err := cmd.StdinPipe()
		ts.Check(err)
		defer in.Close()
	}
	pipe, err := cmd.StderrPipe()
	ts.Check(err)
	ts.Check(cmd.Start())
	var stderr bytes.Buffer
	matched := make(chan struct{})
	scanned := make(chan struct{}) // stderr is at EOF: the process closed it
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pipe)
		once := false
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if !once && re.MatchString(sc.Text()) {
				once = true
				close(matched)
			}
		}
		if !once {
			close(matched)
		}
	}()
	// The registry in these scripts stalls: without the interrupt nothing would end the command.
	// The bound only keeps a broken build from hanging the suite.
	select {
	case <-matched:
	case <-time.After(slowdown.Scale(60 * time.Second)):
		cmd.Process.Kill()
		ts.Fatalf("%s never printed a line matching %q", args[1], args[0])
	}
	ts.Check(cmd.Process.Signal(sig))
	select {
	case <-scanned:
	case <-time.After(slowdown.Scale(30 * time.Second)):
		cmd.Process.Kill()
		ts.Fatalf("%s did not stop after %v", args[1], sig)
	}
	werr := cmd.Wait()
	fmt.Fprint(ts.Stdout(), stdout.String())
	fmt.Fprint(ts.Stderr(), stderr.String())
	var ee *exec.ExitError
	code := 0
	if errors.As(werr, &ee) {
		code = ee.ExitCode()
	}
	if code != 130 {
		ts.Fatalf("%s exited %d after %v, want 130\n%s", args[1], code, sig, stderr.String())
	}
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// scriptEnv is the script's environment, for commands started outside ts.Exec.
func scriptEnv(ts *testscript.TestScript) []string {
	keys := map[string]bool{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	for _, k := range []string{"WORK", "HOME", "MURMUR_HOME", "PATH", "NO_COLOR", "TERM", "MUR_OFFLINE",
		"MUR_GITHUB_API_BASE", "MUR_NETWORK_TIMEOUT", "CI", "SSL_CERT_FILE", "DOCKER_CONFIG", "TMPDIR",
		"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy", slowdown.Env} {
		keys[k] = true
	}
	var env []string
	for k := range keys {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// ptyexec COLS prog args...: runs prog with a pseudo-terminal of COLS columns and 24 rows as
// stdin, stdout and stderr; what the terminal received becomes stdout (line ends are \r\n).
func cmdPtyExec(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: ptyexec COLS program [args...]")
	}
	cols, err := strconv.Atoi(args[0])
	ts.Check(err)
	path := args[1]
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		if p := filepath.Join(dir, args[1]); fileExists(p) {
			path = p
			break
		}
	}
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: 24})
	ts.Check(err)
	var out bytes.Buffer
	_, err = io.Copy(&out, ptmx)
	ptmx.Close()
	if err != nil && !errors.Is(err, syscall.EIO) {
		ts.Fatalf("reading the terminal: %v", err)
	}
	werr := cmd.Wait()
	fmt.Fprint(ts.Stdout(), out.String())
	if werr != nil && !neg {
		ts.Fatalf("%s: %v\n%s", args[1], werr, out.String())
	}
	if werr == nil && neg {
		ts.Fatalf("%s succeeded unexpectedly", args[1])
	}
}

// screen COLS: replaces stdout (what a terminal of COLS columns received) with the screen it
// shows at the end, one row a line. Like a real terminal it wraps what is written past the last
// column, so a progress line that is too long shows up as the stale rows it leaves behind.
func cmdScreen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: screen COLS")
	}
	cols, err := strconv.Atoi(args[0])
	ts.Check(err)
	rows, err := render(ts.ReadFile("stdout"), cols)
	if err != nil {
		ts.Fatalf("%v", err)
	}
	fmt.Fprint(ts.Stdout(), strings.Join(rows, "\n")+"\n")
}

// render is a small terminal: printable runes (wrapped at the last column), \r, \n, ESC[K
// (erase to the end of the line), ESC[nA (cursor up) and SGR colour codes, which it drops.
func render(s string, cols int) ([]string, error) {
	var screen [][]rune
	row, col := 0, 0
	line := func() []rune {
		for len(screen) <= row {
			screen = append(screen, nil)
		}
		return screen[row]
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '\r':
			col = 0
		case '\n':
			row++
			col = 0
		case 0x1b:
			j := i + 1
			if j >= len(rs) || rs[j] != '[' {
				return nil, fmt.Errorf("an escape that is not CSI at %d", i)
			}
			j++
			k := j
			for k < len(rs) && (rs[k] >= '0' && rs[k] <= '9' || rs[k] == ';') {
				k++
			}
			if k >= len(rs) {
				return nil, fmt.Errorf("an unfinished escape at %d", i)
			}
			n, _ := strconv.Atoi(string(rs[j:k]))
			switch rs[k] {
			case 'K':
				l := line()
				if col < len(l) {
					screen[row] = l[:col]
				}
			case 'A':
				row = max(row-max(n, 1), 0)
			case 'm':
			default:
				return nil, fmt.Errorf("an escape ESC[%s%c this terminal does not know", string(rs[j:k]), rs[k])
			}
			i = k
		default:
			if col >= cols { // a terminal wraps a character written past the last column
				row++
				col = 0
			}
			l := line()
			for len(l) <= col {
				l = append(l, ' ')
			}
			l[col] = c
			screen[row] = l
			col++
		}
	}
	out := make([]string, 0, len(screen))
	for _, l := range screen {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out, nil
}
