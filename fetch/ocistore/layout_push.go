package ocistore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
)

// writeBlob writes a blob through the atomic writer, checking size and digest before it becomes
// visible. An existing blob of the right size is kept and r is not read.
func (s *layoutStore) writeBlob(what string, h v1.Hash, size int64, r io.Reader) error {
	final := s.blobPath(h)
	if fi, err := os.Stat(final); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return errs.Wrap(err, errs.IO, "%s: creating %s: %v", s.addr, filepath.Dir(final), err)
	}
	// The temporary file sits in the layout's root, not in blobs/, so no tool reading the
	// layout ever mistakes it for a blob.
	f, err := atomicfile.Create(s.dir, final, 0o644)
	if err != nil {
		return errs.Wrap(err, errs.IO, "%s: writing %s: %v", s.addr, what, err)
	}
	defer f.Abort()
	hasher := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, hasher), io.LimitReader(r, size+1))
	if err != nil {
		return errs.Wrap(err, errs.IO, "%s: writing %s: %v", s.addr, what, err)
	}
	got := "sha256:" + hex.EncodeToString(hasher.Sum(nil))
	if n != size || got != h.String() {
		shown := fmt.Sprint(n)
		if n > size {
			shown = fmt.Sprintf("more than %d", size)
		}
		return errs.New(errs.Integrity, "%s: %s is %s bytes hashing to %s; expected %d bytes with digest %s; nothing was written", s.addr, what, shown, got, size, h)
	}
	if err := f.Commit(); err != nil {
		return errs.Wrap(err, errs.IO, "%s: writing %s: %v", s.addr, what, err)
	}
	return nil
}

func (s *layoutStore) writeSmallBlob(what string, raw []byte) error {
	return s.writeBlob(what, sha256Hash(raw), int64(len(raw)), strings.NewReader(string(raw)))
}

func (s *layoutStore) Push(ctx context.Context, desc store.Descriptor, payload io.Reader) error {
	if err := checkPushDescriptor(s.addr, desc); err != nil {
		return err
	}
	repo := desc.Name.String()
	tag := ref.TagFromVersion(desc.Version)
	where := s.where(repo, tag)
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return errs.Wrap(err, errs.IO, "%s: creating the layout folder: %v", s.addr, err)
	}
	// A first look, without the lock, refuses a conflict before a large payload is copied.
	plan, err := planPush(ctx, s, repo, tag, desc)
	if err != nil {
		return err
	}
	payloadWhat := fmt.Sprintf("the payload of %s@%s", desc.Name, desc.Version)
	if err := s.writeBlob(payloadWhat, toHash(desc.Digest), desc.Size, payload); err != nil {
		return err
	}
	if plan.noop {
		return nil
	}
	if err := s.writeSmallBlob("the empty config", emptyConfig); err != nil {
		return err
	}
	if err := s.writeSmallBlob("the manifest of "+where, plan.manifest); err != nil {
		return err
	}

	unlock, err := lockedfile.Lock(ctx, filepath.Join(s.dir, LockFile))
	if err != nil {
		return errs.Wrap(err, errs.IO, "%s: locking %s: %v", s.addr, LockFile, err)
	}
	defer unlock()
	// Another process may have pushed while this one copied the payload: plan again under the lock.
	plan, err = planPush(ctx, s, repo, tag, desc)
	if err != nil || plan.noop {
		return err
	}
	rootRaw, rootType := plan.manifest, types.OCIManifestSchema1
	if plan.root != nil {
		rootRaw, rootType = plan.root, types.OCIImageIndex
		if err := s.writeSmallBlob("the index of "+where, rootRaw); err != nil {
			return err
		}
	}
	idx, _, err := s.readIndex()
	if err != nil {
		return err
	}
	entry, err := json.Marshal(v1.Descriptor{
		MediaType:    rootType,
		Size:         int64(len(rootRaw)),
		Digest:       sha256Hash(rootRaw),
		ArtifactType: artifactType,
		Annotations:  map[string]string{AnnotationRefName: repo + ":" + tag},
	})
	if err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding the index entry: %v", where, err)
	}
	var manifests []json.RawMessage
	for i, m := range idx.manifests {
		if idx.entries[i].Annotations[AnnotationRefName] != repo+":"+tag {
			manifests = append(manifests, m)
		}
	}
	manifests = append(manifests, entry)
	if err := s.writeIndex(idx.top, manifests); err != nil {
		return err
	}
	return nil
}

func (s *layoutStore) writeIndex(top map[string]json.RawMessage, manifests []json.RawMessage) error {
	layoutFile := filepath.Join(s.dir, "oci-layout")
	if _, err := os.Stat(layoutFile); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(layoutFile, []byte(`{"imageLayoutVersion":"1.0.0"}`+"\n"), 0o644); err != nil {
			return errs.Wrap(err, errs.IO, "%s: writing oci-layout: %v", s.addr, err)
		}
	}
	set := func(k string, v any) error {
		b, err := json.Marshal(v)
		top[k] = b
		return err
	}
	if err := set("schemaVersion", 2); err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding index.json: %v", s.addr, err)
	}
	if err := set("mediaType", types.OCIImageIndex); err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding index.json: %v", s.addr, err)
	}
	if manifests == nil {
		manifests = []json.RawMessage{}
	}
	if err := set("manifests", manifests); err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding index.json: %v", s.addr, err)
	}
	raw, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding index.json: %v", s.addr, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(s.dir, "index.json"), append(raw, '\n'), 0o644); err != nil {
		return errs.Wrap(err, errs.IO, "%s: writing index.json: %v", s.addr, err)
	}
	return nil
}
