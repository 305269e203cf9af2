//go:build unix

package sigstore

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// compact is a trusted root on one line, as `gh attestation trusted-root` prints each.
func compact(t *testing.T, path string) []byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestLoadRootsReadsBothShapes(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "roots.jsonl")
	os.WriteFile(lines, append(append(compact(t, "roots/public-good.json"), '\n'), compact(t, "roots/github.json")...), 0o644)
	for path, n := range map[string]int{"roots/github.json": 1, lines: 2} {
		r, err := LoadRoots(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(r.instances) != n {
			t.Fatalf("%s: %d instances, want %d", path, len(r.instances), n)
		}
	}
}

// A trusted_root that is not one is refused as invalid-config, saying what it is not and where,
// and never quoting what the file holds: config.yaml may point it at any file.
func TestLoadRootsRefusesWhatIsNotARoot(t *testing.T) {
	const secret = "SECRET-7f3a"
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := compact(t, "roots/github.json")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(write("target.json", good), link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, says string
	}{
		{"empty", write("empty.json", nil), "holds no trusted root"},
		{"blank", write("blank.json", []byte("\n  \n")), "holds no trusted root"},
		{"not JSON", write("text.json", []byte(secret+"\n")), "invalid JSON at line 1"},
		{"broken JSON, third line", write("broken.json", []byte("{\n \"mediaType\": \"x\",\n "+secret+"\n}\n")), "invalid JSON at line 3"},
		{"broken second document", write("lines.jsonl", append(append(good, '\n'), "{"+secret...)), "invalid JSON at line 2"},
		{"an array", write("array.json", []byte(`["`+secret+`"]`)), "line 1 is not an object"},
		{"another mediaType", write("other.json", []byte(`{"mediaType":"`+secret+`"}`)), "line 1 has not the mediaType application/vnd.dev.sigstore.trustedroot+json;version=0.1"},
		{"malformed root", write("malformed.json", []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1","certificateAuthorities":"`+secret+`"}`)), "line 1 does not parse"},
		{"too large", write("large.json", bytes.Repeat([]byte(" "), maxRootFile+1)), "over 1048576 bytes"},
		{"symlink", link, "is a symlink"},
		{"FIFO", fifo, "is a FIFO"},
		{"missing", filepath.Join(dir, "nope.json"), "can't be read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadRoots(c.path)
			errtest.WantToken(t, err, errs.InvalidConfig, "trusted_root "+c.path, c.says)
			if strings.Contains(err.Error(), secret) || strings.Contains(errs.Message(err), secret) {
				t.Fatalf("the error quotes the file: %v", err)
			}
		})
	}
}

// An empty trusted_root is refused by the helper too, not taken as "no roots" or as the
// embedded ones.
func TestLocalRefusesEmptyTrustedRoot(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "roots.json")
	os.WriteFile(empty, nil, 0o644)
	raw, err := os.ReadFile("testdata/github-attestation.sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	var l Local
	_, err = l.Verify(t.Context(), raw, realSubject, realExpect(), provenance.Trust{RootFile: empty})
	errtest.WantToken(t, err, errs.InvalidConfig, "holds no trusted root")
}
