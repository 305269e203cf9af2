//go:build unix

package sigstore

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// tufHelperEnv makes the test binary, re-run as TestTUFRefreshProcess, a refresh of github's
// trusted root that stops at the step the variable names, for its parent to kill there.
const tufHelperEnv = "MUR_TUF_TEST_HELPER"

// TestTUFRefreshProcess is not a test: it is the body of the refresh that the tests below kill.
// It reads the RootsCache from its standard input, says "at STEP" when it gets there and waits.
func TestTUFRefreshProcess(t *testing.T) {
	step := os.Getenv(tufHelperEnv)
	if step == "" {
		t.Skip("only runs as a helper process")
	}
	var cache provenance.RootsCache
	if err := json.NewDecoder(os.Stdin).Decode(&cache); err != nil {
		fmt.Println("no cache:", err)
		os.Exit(2)
	}
	insts, err := instanceCaches(&cache)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	gh := insts[1]
	gh.at = func(s string) {
		if s == step {
			fmt.Println("at " + s)
			time.Sleep(10 * time.Minute) // bounded, should the parent die first
		}
	}
	_, err = gh.refresh(context.Background(), true)
	fmt.Printf("the refresh ended without reaching %s: %v\n", step, err)
	os.Exit(3)
}

// killAt runs a refresh of w's github instance in another process and kills it (SIGKILL) once it
// reaches step.
func killAt(t *testing.T, w *tufWorld, step string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), slowdown.Scale(2*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestTUFRefreshProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), tufHelperEnv+"="+step)
	in, _ := json.Marshal(w.cache)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var said []string
	for sc.Scan() && sc.Text() != "at "+step {
		said = append(said, sc.Text())
	}
	if sc.Text() != "at "+step {
		cmd.Wait()
		t.Fatalf("the refresh never reached %s: %q", step, said)
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// names lists dir's entries.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// wantInUse fails unless github's root in use is the cache's, and says what want says.
func (w *tufWorld) wantInUse(t *testing.T, want []byte, when string) {
	t.Helper()
	if data, src := w.github(t).inUse(); src != "cache" || !sameJSON(data, want) {
		t.Fatalf("%s: github's root in use comes from the %s, and is the one wanted: %v", when, src, sameJSON(data, want))
	}
}

// refreshedTwice is a world whose github instance has taken the first root its repository
// published and then a second one, taken, at timestamp version 2.
func refreshedTwice(t *testing.T) (*tufWorld, []byte) {
	t.Helper()
	w := newTUFWorld(t)
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	taken := provenancetest.NewCA(t, "GitHub, Inc.").TrustedRootJSON(t)
	w.gh.Publish(taken)
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	return w, taken
}

// A refresh killed at any step leaves the trusted metadata whole: the root in use is the one
// before the refresh or the one after, the metadata that vouched for it is kept, so that a
// repository replaying older metadata is still refused, and the next refresh takes the newest
// and leaves one generation behind.
func TestRefreshSurvivesAKillAtEveryStep(t *testing.T) {
	for _, step := range []string{"fetched", "renamed", "swapped"} {
		t.Run(step, func(t *testing.T) {
			w, before := refreshedTwice(t)
			after := provenancetest.NewCA(t, "GitHub, Inc.").TrustedRootJSON(t)
			w.gh.Publish(after)

			killAt(t, w, step)
			want := before
			if step == "swapped" {
				want = after
			}
			w.wantInUse(t, want, "after the kill")

			w.gh.RollBackTo(1)
			_, err := w.refresh(t)
			errtest.WantToken(t, err, errs.Integrity, "github's TUF repository", "keeps the trusted root it had")
			w.wantInUse(t, want, "after a rollback was refused")

			newest := provenancetest.NewCA(t, "GitHub, Inc.").TrustedRootJSON(t)
			w.gh.Publish(newest)
			if _, err := w.refresh(t); err != nil {
				t.Fatal(err)
			}
			w.wantInUse(t, newest, "after the next refresh")
			left := names(t, w.ghDir)
			if len(left) != 3 || left[0] != filepath.Base(filepath.Dir(w.cachedRoot(t))) || left[1] != "lock" || left[2] != "state.json" {
				t.Fatalf("the instance folder holds %q, want one generation, the lock and state.json", left)
			}
		})
	}
}

// Metadata lost anyway (deleted by hand, a disk error) does not open the door to a rollback:
// state.json remembers the timestamp version last taken, and an older one is refused.
func TestRefreshRefusesARollbackWithoutItsMetadata(t *testing.T) {
	w, taken := refreshedTwice(t)
	if err := os.RemoveAll(filepath.Join(filepath.Dir(w.cachedRoot(t)), "tuf")); err != nil {
		t.Fatal(err)
	}
	w.gh.RollBackTo(1)
	_, err := w.refresh(t)
	errtest.WantToken(t, err, errs.Integrity, "serves timestamp metadata version 1, older than version 2 that this machine took before")
	w.wantInUse(t, taken, "after the rollback")
}

// A cache in the layout before generations (tuf/ and trusted_root.json in the instance folder) is
// used as it is, its metadata still refuses a rollback, and the next refresh moves it into a
// generation.
func TestCacheBeforeGenerationsIsUsed(t *testing.T) {
	w, taken := refreshedTwice(t)
	gh := w.github(t)
	st := gh.state()
	gen := filepath.Join(w.ghDir, st.Current)
	for _, n := range []string{"tuf", targetName} {
		if err := os.Rename(filepath.Join(gen, n), filepath.Join(w.ghDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(gen)
	st.Current, st.TimestampVersion = "", 0
	if err := gh.saveState(st); err != nil {
		t.Fatal(err)
	}
	w.wantInUse(t, taken, "the layout before generations")
	w.gh.RollBackTo(1)
	if _, err := w.refresh(t); errs.TokenOf(err) != errs.Integrity {
		t.Fatalf("a rollback against the layout before generations: %v", err)
	}
	w.gh.Publish(taken)
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	if left := names(t, w.ghDir); len(left) != 3 || !strings.HasPrefix(left[0], genPrefix) {
		t.Fatalf("after a refresh the instance folder holds %q, want one generation, the lock and state.json", left)
	}
}

// The trust folder, an instance's folder and a generation are never followed through a symlink:
// a refresh is refused and writes nothing where the link points, and the root in use is the
// embedded one.
func TestTrustFoldersAreNotLinks(t *testing.T) {
	for _, link := range []string{"trust", "instance", "generation"} {
		t.Run(link, func(t *testing.T) {
			w := newTUFWorld(t)
			if _, err := w.refresh(t); err != nil {
				t.Fatal(err)
			}
			elsewhere := filepath.Join(t.TempDir(), "elsewhere")
			var linked string
			switch link {
			case "trust":
				linked = w.cache.Dir
			case "instance":
				linked = w.ghDir
			case "generation":
				linked = filepath.Dir(w.cachedRoot(t))
			}
			if err := os.Rename(linked, elsewhere); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, linked); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, elsewhere)
			if data, src := w.github(t).inUse(); src != "embedded" || !sameJSON(data, githubRoot) {
				t.Fatalf("through a symlinked %s folder, the root in use comes from the %s", link, src)
			}
			_, err := w.refresh(t)
			errtest.WantToken(t, err, errs.Denied, linked, "symlink", "run 'mur trust refresh'")
			if after := snapshotDir(t, elsewhere); !maps.Equal(after, before) {
				t.Fatalf("a refused refresh wrote through the link: %d files before, %d after, or some changed", len(before), len(after))
			}
		})
	}
}

// A refresh records when the metadata that vouched for the root expires, the earliest of its
// top-level roles: what makes a verify try again within the hour once it has passed.
func TestRefreshRecordsTheMetadataExpiry(t *testing.T) {
	w := newTUFWorld(t)
	expires := w.gh.ExpireTimestampAt(time.Now().Add(3 * time.Hour))
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	st := w.github(t).state()
	if !st.Expires.Equal(expires) {
		t.Fatalf("state records expiry %s, want the timestamp's %s, the earliest of the metadata", st.Expires, expires)
	}
	if st.TimestampVersion != 2 {
		t.Fatalf("state records timestamp version %d, want 2", st.TimestampVersion)
	}
	st.Attempted = time.Now().Add(-2 * time.Hour)
	if st.due(time.Now()) || !st.due(expires.Add(time.Minute)) {
		t.Fatal("the recorded expiry does not make a refresh due once it has passed")
	}
}

// A new generation never lands on the one in use, even when the staging folder's random part is
// the one the generation in use took from its own.
func TestCommitNeverReplacesAGeneration(t *testing.T) {
	w := newTUFWorld(t)
	gh := w.github(t)
	for _, d := range []string{".refresh-777", "gen-777/tuf"} {
		if err := os.MkdirAll(filepath.Join(w.ghDir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	name, err := gh.commit(filepath.Join(w.ghDir, ".refresh-777"), githubRoot)
	if err != nil || name != "gen-777-2" {
		t.Fatalf("commit: %q, %v; want gen-777-2 beside gen-777", name, err)
	}
	if _, err := os.Stat(filepath.Join(w.ghDir, "gen-777", "tuf")); err != nil {
		t.Fatalf("the generation in use was touched: %v", err)
	}
}
