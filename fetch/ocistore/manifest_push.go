package ocistore

import (
	"context"
	"errors"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// pushPlan is what a push writes: the manifest, and the object the tag will point at.
type pushPlan struct {
	noop         bool
	manifest     []byte
	root         []byte // nil when the tag points at the manifest itself (an OCI index otherwise)
	manifestDesc v1.Descriptor
}

// planPush decides, from what repo:tag holds now, what pushing desc writes, and refuses a version
// and platform already held with another digest.
func planPush(ctx context.Context, r manifestReader, repo, tag string, desc fstore.Descriptor) (pushPlan, error) {
	manifest, err := buildManifest(desc)
	if err != nil {
		return pushPlan{}, errs.Wrap(err, errs.Internal, "encoding the manifest of %s@%s: %v", desc.Name, desc.Version, err)
	}
	plan := pushPlan{manifest: manifest, manifestDesc: childDescriptor(manifest, desc.Platform)}
	tc, err := readTag(ctx, r, repo, tag)
	switch {
	case errors.Is(err, errs.NotFound):
		tc = tagContent{}
	case err != nil:
		return pushPlan{}, err
	}
	var keep []v1.Descriptor
	for _, c := range tc.children {
		held, err := tc.load(ctx, r, repo, tag, c, desc.Name, desc.Version)
		if err != nil {
			return pushPlan{}, err
		}
		if held.Version != desc.Version {
			return pushPlan{}, errs.New(errs.LockConflict, "%s already holds version %q under the tag of %q (%s); publish under another version", r.where(repo, tag), held.Version, desc.Version, sharedTag(held.Version, desc.Version))
		}
		if held.Platform == desc.Platform {
			if held.Digest != desc.Digest {
				return pushPlan{}, errs.New(errs.LockConflict, "%s already holds %s@%s for platform %s with digest %s; refusing to replace it with %s; publish a new version instead", r.where(repo, tag), desc.Name, desc.Version, desc.Platform, held.Digest, desc.Digest)
			}
			plan.noop = true
			return plan, nil
		}
		keep = append(keep, c)
	}
	if len(keep) == 0 && desc.Platform == ref.PlatformAny {
		return plan, nil
	}
	plan.root, err = buildIndex(desc.Name, desc.Version, append(keep, plan.manifestDesc))
	if err != nil {
		return pushPlan{}, errs.Wrap(err, errs.Internal, "encoding the index of %s@%s: %v", desc.Name, desc.Version, err)
	}
	return plan, nil
}

// checkPushDescriptor refuses a descriptor that can't be published.
func checkPushDescriptor(store string, desc fstore.Descriptor) error {
	if err := ref.ValidateSegment(desc.Name.Scope); err != nil {
		return errs.New(errs.Usage, "pushing to %s: artifact name %q: %s", store, desc.Name, errs.Message(err))
	}
	if err := ref.ValidateSegment(desc.Name.Name); err != nil {
		return errs.New(errs.Usage, "pushing to %s: artifact name %q: %s", store, desc.Name, errs.Message(err))
	}
	if err := ref.ValidateVersion(desc.Version); err != nil {
		return errs.New(errs.Usage, "pushing %s to %s: %s", desc.Name, store, errs.Message(err))
	}
	if err := ref.ValidatePlatform(desc.Platform); err != nil {
		return errs.New(errs.Usage, "pushing %s@%s to %s: %s", desc.Name, desc.Version, store, errs.Message(err))
	}
	if _, err := ref.ParseDigest(desc.Digest.String()); err != nil {
		return errs.New(errs.Usage, "pushing %s@%s to %s: %s", desc.Name, desc.Version, store, errs.Message(err))
	}
	if desc.Size < 0 {
		return errs.New(errs.Usage, "pushing %s@%s to %s: size %d is negative", desc.Name, desc.Version, store, desc.Size)
	}
	return nil
}
