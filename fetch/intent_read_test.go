package fetch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/safefile"
)

const (
	fullYAML = "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n  - name: acme/notes\n    version: 1.0.0\n"
	halfYAML = "name: p\nartifacts:\n  - name: acme/grep\n    version: 1.0.0\n" // an editor's save cut short
)

// save writes data over path in place, as an editor that truncates and writes does.
func save(t testing.TB, path, data string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Error(err) // a seam runs on the reader's goroutine
		return
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Error(err)
	}
}

func yamlFile(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "murmur.yaml")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readStable tells a read that changed under it from one that did not, and reads again until
// one did not, a bounded number of times.
func TestReadStable(t *testing.T) {
	tests := []struct {
		name       string
		torn       func(t *testing.T, path string, try int)
		wantTries  int
		wantStable bool
		wantData   string
	}{
		{name: "a file left alone is read once", wantTries: 1, wantStable: true, wantData: fullYAML},
		{
			name: "a save between the stat and the read is read again",
			torn: func(t *testing.T, path string, try int) {
				if try == 0 {
					save(t, path, halfYAML)
				}
			},
			wantTries: 2, wantStable: true, wantData: halfYAML,
		},
		{
			name: "a save of the same length is seen by the stat",
			torn: func(t *testing.T, path string, try int) {
				if try == 0 {
					save(t, path, fullYAML[:len(fullYAML)-2]+"2\n") // acme/notes at 1.0.2
					os.Chtimes(path, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
				}
			},
			wantTries: 2, wantStable: true, wantData: fullYAML[:len(fullYAML)-2] + "2\n",
		},
		{
			name: "a file saved over and over is never stable",
			torn: func(t *testing.T, path string, try int) {
				save(t, path, []string{halfYAML, fullYAML}[try%2])
			},
			wantTries: stableTries, wantStable: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := yamlFile(t, fullYAML)
			tries, done := 0, 0
			SetReadSeams(t, func(p string, try int) {
				if p != path || try != tries {
					t.Errorf("seam at %s try %d, want %s try %d", p, try, path, tries)
				}
				tries++
				if tt.torn != nil {
					tt.torn(t, p, try)
				}
			}, func(string) { done++ })
			r, err := readStable(path)
			if err != nil {
				t.Fatal(err)
			}
			if tries != tt.wantTries || done != 1 || r.stable != tt.wantStable {
				t.Fatalf("%d tries, done %d times, stable %v; want %d tries, done once, stable %v", tries, done, r.stable, tt.wantTries, tt.wantStable)
			}
			if tt.wantStable && string(r.data) != tt.wantData {
				t.Fatalf("read %q, want %q", r.data, tt.wantData)
			}
		})
	}
}

// A file changed moments ago is not settled until the settle window has passed since; one whose
// time is in the future never is.
func TestSettledIn(t *testing.T) {
	path := yamlFile(t, fullYAML)
	r, err := readStable(path)
	if err != nil || !r.stable {
		t.Fatal(err, r.stable)
	}
	if w := r.settledIn(time.Now()); w <= 0 || w > settleWindow {
		t.Fatalf("a file written just now settles in %v, want (0, %v]", w, settleWindow)
	}
	if w := r.settledIn(r.changed.Add(settleWindow)); w != 0 {
		t.Fatalf("a file left alone for the settle window settles in %v, want 0", w)
	}
	if w := r.settledIn(r.changed.Add(-time.Second)); w != settleWindow {
		t.Fatalf("a file changed in the future settles in %v, want the whole window", w)
	}
	// The change time counts: a modification time set back does not make a save look old.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if r, _ = readStable(path); r.settledIn(time.Now()) == 0 {
		t.Fatalf("a file whose modification time was set back an hour counts as settled (changed %v)", r.changed)
	}
}

// A murmur.yaml that never stops changing is not acted on as a command starts.
func TestLoadIntentRefusesAnUnstableFile(t *testing.T) {
	path := yamlFile(t, fullYAML)
	SetReadSeams(t, func(p string, try int) { save(t, p, []string{halfYAML, fullYAML}[try%2]) }, nil)
	if _, err := loadIntent(path); err == nil {
		t.Fatal("an unstable murmur.yaml was loaded")
	}
	SetReadSeams(t, nil, nil)
	save(t, path, fullYAML) // the editor is done
	c, err := loadIntent(path)
	if err != nil || len(c.Artifacts) != 2 {
		t.Fatalf("%v, %+v", err, c)
	}
}

type fakeInfo struct {
	size  int64
	mtime time.Time
	mode  os.FileMode
}

func (f fakeInfo) Name() string       { return "murmur.yaml" }
func (f fakeInfo) Size() int64        { return f.size }
func (f fakeInfo) Mode() os.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return f.mtime }
func (f fakeInfo) IsDir() bool        { return false }
func (f fakeInfo) Sys() any           { return nil }

// A try is steady only when everything it saw agrees.
func TestSteady(t *testing.T) {
	now := time.Now()
	whole := []byte(fullYAML)
	info := fakeInfo{size: int64(len(whole)), mtime: now, mode: 0o644}
	tests := []struct {
		name          string
		before, after fakeInfo
		first, again  []byte
		want          bool
	}{
		{"all agree", info, info, whole, whole, true},
		{"the reads differ", info, info, []byte(halfYAML), whole, false},
		{"the sizes differ", fakeInfo{size: 0, mtime: now, mode: 0o644}, info, whole, whole, false},
		{"the modification times differ", fakeInfo{size: info.size, mtime: now.Add(-time.Millisecond), mode: 0o644}, info, whole, whole, false},
		{"the modes differ", fakeInfo{size: info.size, mtime: now, mode: 0o600}, info, whole, whole, false},
		// Truncated and rewritten within one tick of the clock: both reads saw the half.
		{"the file holds more than was read", info, info, []byte(halfYAML), []byte(halfYAML), false},
	}
	for _, tt := range tests {
		if got := steady(tt.before, tt.after, tt.first, tt.again); got != tt.want {
			t.Errorf("%s: steady = %v, want %v", tt.name, got, tt.want)
		}
	}
	// Another file of the same size and times (a save that renamed a new file in) is not the
	// same file.
	a, b := yamlFile(t, fullYAML), yamlFile(t, fullYAML)
	for _, p := range []string{a, b} {
		if err := os.Chtimes(p, now, now); err != nil {
			t.Fatal(err)
		}
	}
	fa, _ := os.Lstat(a)
	fb, _ := os.Lstat(b)
	if safefile.Stamp(fa) == "" {
		t.Skip("no inode or change time on this system")
	}
	if steady(fa, fb, whole, whole) {
		t.Error("steady = true across two files")
	}
}
