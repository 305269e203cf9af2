package ocistore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// A layout store keeps its reading of index.json only while the file is the one it read: a
// version another process pushed since is found, and one it removed (index.json rewritten in
// place, by a tool that does not rename) is not.
func TestLayoutIndexFollowsTheFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	reader := open(t, "oci-layout:"+dir, ocistore.Options{})
	writer := open(t, "oci-layout:"+dir, ocistore.Options{})
	push(t, writer, grep, "1.0.0", "any", payload(100, 1))
	if _, err := reader.Resolve(ctx, grep, "1.0.0", "any"); err != nil {
		t.Fatal(err)
	}
	sed := ref.Name{Scope: "acme", Name: "sed"}
	push(t, writer, sed, "2.0.0", "any", payload(100, 2))
	if _, err := reader.Resolve(ctx, sed, "2.0.0", "any"); err != nil {
		t.Fatalf("a version pushed after the store read index.json: %v", err)
	}
	// The same file, rewritten in place without acme/sed: the same inode.
	path := filepath.Join(dir, "index.json")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	only := removeRef(t, before, "acme/sed:2.0.0")
	if _, err := f.Write(only); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = reader.Resolve(ctx, sed, "2.0.0", "any")
	errtest.WantToken(t, err, errs.NotFound, "acme/sed")
}

// removeRef is index.json without the entries named refName.
func removeRef(t *testing.T, index []byte, refName string) []byte {
	t.Helper()
	var idx map[string]any
	if err := json.Unmarshal(index, &idx); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, m := range idx["manifests"].([]any) {
		ann, _ := m.(map[string]any)["annotations"].(map[string]any)
		if ann[ocistore.AnnotationRefName] != refName {
			kept = append(kept, m)
		}
	}
	idx["manifests"] = kept
	out, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
