package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/lock"
)

func TestLockForgetScope(t *testing.T) {
	proj := t.TempDir()
	if err := os.WriteFile(filepath.Join(proj, "murmur.yaml"), []byte("name: demo\nversion: \"1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lockPath := filepath.Join(proj, lock.FileName)
	err := lock.Update(context.Background(), lockPath, func(l *lock.Lock) error {
		if err := l.SetPin("acme", lock.ScopePin{Source: "github:acme/murmur-tools", OwnerID: 1234567, RepoID: 7654321}); err != nil {
			return err
		}
		if err := l.SetPin("beta", lock.ScopePin{Source: "github:beta/murmur-artifacts", OwnerID: 5, RepoID: 6}); err != nil {
			return err
		}
		return l.Upsert("acme/grep", "1.2.0", "any", strings.Repeat("ab", 32), "", false)
	})
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(proj, "src", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)

	code, out, errOut := runMur(t, "lock", "forget-scope", "acme")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "forgot scope acme") || !strings.Contains(out, "1234567") || !strings.Contains(out, lockPath) {
		t.Fatalf("output: %q", out)
	}
	l, err := lock.Read(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Pin("acme"); ok {
		t.Fatal("pin still there")
	}
	if _, ok := l.Pin("beta"); !ok || l.Find("acme/grep") == nil {
		t.Fatal("forget-scope removed more than the scope pin")
	}

	// Again: nothing to remove, and the file is left alone.
	before, _ := os.Stat(lockPath)
	code, out, _ = runMur(t, "--json", "lock", "forget-scope", "acme")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var res forgetResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if res.Removed || res.Scope != "acme" || res.Lock != lockPath || res.Pin != nil {
		t.Fatalf("json = %+v", res)
	}
	after, _ := os.Stat(lockPath)
	if !os.SameFile(before, after) {
		t.Fatal("lock rewritten although nothing changed")
	}

	// --json after the subcommand, with a pin to remove.
	code, out, _ = runMur(t, "lock", "forget-scope", "beta", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	res = forgetResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Removed || res.Pin == nil || res.Pin.OwnerID != 5 || res.Pin.RepoID != 6 || res.Pin.Source != "github:beta/murmur-artifacts" {
		t.Fatalf("json = %+v", res)
	}
}

func TestLockForgetScopeNoProject(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	code, out, errOut := runMur(t, "lock", "forget-scope", "acme")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "no owner pin for scope acme") {
		t.Fatalf("output %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, lock.FileName)); !os.IsNotExist(err) {
		t.Fatal("forget-scope created a lock")
	}
}

func TestLockForgetScopeRefusals(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"lock", "forget-scope"},
		{"lock", "forget-scope", "a", "b"},
		{"lock", "forget-scope", "Acme"},
	} {
		code, _, errOut := runMur(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "mur: usage: ") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
	// A broken lock is reported, not overwritten.
	bad := []byte("lock_version: 2\nscopes: {}\n")
	if err := os.WriteFile(filepath.Join(dir, lock.FileName), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runMur(t, "lock", "forget-scope", "acme")
	if code != 1 || !strings.HasPrefix(errOut, "mur: invalid-lock: ") || !strings.Contains(errOut, "lock_version is 2") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, lock.FileName)); !bytes.Equal(data, bad) {
		t.Fatal("broken lock changed")
	}
}
