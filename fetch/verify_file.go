package fetch

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// VerifyFileInput is what `mur verify FILE --bundle B` checks: a packed file against a Sigstore
// bundle, before it is released, as `gh attestation verify FILE` and `cosign verify-blob
// --bundle` do. Exactly one of OwnerID and RepoID (a GitHub attestation) or Key (a keyed
// bundle) says who must have signed.
type VerifyFileInput struct {
	File   string
	Bundle string
	// OwnerID and RepoID are the GitHub ids the attestation's certificate must carry, and
	// SignerWorkflow, when set, a prefix of its workflow URL; TrustedRoot replaces the embedded
	// roots, as the home's trusted_root does.
	OwnerID, RepoID int64
	SignerWorkflow  string
	TrustedRoot     string
	// Key is the PEM of the public key a keyed bundle must be signed by; KeyFile names it.
	Key     []byte
	KeyFile string
	// Verifier checks the bundle (mur-provenance).
	Verifier provenance.Verifier
}

// VerifiedFile is what VerifyFile proved.
type VerifiedFile struct {
	File       string            `json:"file"`
	Digest     digest.Digest     `json:"digest"`
	Bundle     string            `json:"bundle"`
	Provenance *provenance.Facts `json:"provenance"` // nil until verified
}

// VerifyFile checks in.File against the bundle in.Bundle: the file's digest must be the
// bundle's subject, and its signer the one asked for.
func VerifyFile(ctx context.Context, in VerifyFileInput) (VerifiedFile, error) {
	out := VerifiedFile{File: in.File, Bundle: in.Bundle}
	github := in.OwnerID != 0 || in.RepoID != 0
	switch {
	case github && in.Key != nil:
		return out, errs.New(errs.Usage, "give --owner-id and --repo-id for a GitHub attestation, or --key for a keyed bundle, not both")
	case github && (in.OwnerID <= 0 || in.RepoID <= 0):
		return out, errs.New(errs.Usage, "a GitHub attestation is checked against both ids: give --owner-id N and --repo-id M (gh api repos/OWNER/REPO --jq '.owner.id, .id' prints them)")
	case !github && in.Key == nil:
		return out, errs.New(errs.Usage, "say who must have signed %s: --owner-id N --repo-id M for a GitHub attestation, or --key KEY.pub for a keyed bundle", in.Bundle)
	case !github && in.SignerWorkflow != "":
		return out, errs.New(errs.Usage, "--signer-workflow applies to GitHub attestations, checked with --owner-id and --repo-id")
	}
	bundle, err := readLocal(in.Bundle, provenance.MaxBundleSize, "the bundle")
	if err != nil {
		return out, err
	}
	sum256, sum512, err := hashFile(in.File)
	if err != nil {
		return out, err
	}
	out.Digest = sum256
	kind, hint := provenance.BundleKind(bundle)
	want := provenance.Expect{Artifact: in.File, OwnerID: in.OwnerID, RepoID: in.RepoID, SignerWorkflow: in.SignerWorkflow, SHA512: sum512}
	var trust provenance.Trust
	switch {
	case github && kind == provenance.KindKey:
		return out, errs.New(errs.Usage, "%s is signed by key %s, not a GitHub attestation; check it with --key KEY.pub", in.Bundle, strconv.Quote(hint))
	case !github && kind == provenance.KindGitHub:
		return out, errs.New(errs.Usage, "%s is a GitHub attestation, signed by a certificate rather than a key; check it with --owner-id N --repo-id M", in.Bundle)
	case github:
		want.Asked = "--owner-id and --repo-id"
		trust.RootFile = in.TrustedRoot
	default:
		keyHint, err := provenance.KeyHint(in.Key, "")
		if err != nil {
			return out, errs.Wrap(err, errs.Usage, "--key %s: %v", in.KeyFile, err)
		}
		want.Asked = "the key of " + in.KeyFile
		trust.Keys = []provenance.TrustedKey{{Hint: keyHint, PEM: string(in.Key)}}
	}
	facts, err := in.Verifier.Verify(ctx, bundle, sum256, want, trust)
	if err != nil {
		return out, err
	}
	out.Provenance = &facts
	return out, nil
}

// readLocal reads a file named on the command line, of at most max bytes.
func readLocal(path string, max int64, what string) ([]byte, error) {
	f, err := openLocal(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't read %s %s: %v", what, path, err)
	}
	if int64(len(data)) > max {
		return nil, errs.New(errs.ProvenanceUnverifiable, "%s %s is over %d bytes, far more than a Sigstore bundle holds, so mur did not check it; give the bundle file (.sigstore.json)", what, path, max)
	}
	return data, nil
}

// openLocal opens a file named on the command line. A symlink the user named is followed, but
// the open never blocks (a FIFO would otherwise hang the command until a writer came) and
// anything other than a regular file is refused.
func openLocal(path, what string) (*os.File, error) {
	f, err := safefile.OpenNamed(path)
	var nr *safefile.NotRegularError
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.Wrap(err, errs.NotFound, "%s %s does not exist", what, path)
	case errors.As(err, &nr):
		return nil, errs.Wrap(err, errs.Usage, "%s %s is not a regular file (it is %s); name the file itself", what, path, nr.Found)
	}
	return nil, errs.Wrap(err, errs.IO, "can't read %s %s: %v", what, path, errs.OSCause(err))
}

// hashFile is the file's SHA-256, as a digest, and its SHA-512 (an Ed25519 bundle signs that).
func hashFile(path string) (digest.Digest, []byte, error) {
	f, err := openLocal(path, "the file")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	h256, h512 := sha256.New(), sha512.New()
	if _, err := io.Copy(io.MultiWriter(h256, h512), f); err != nil {
		return "", nil, errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	return digest.NewDigestFromBytes(digest.SHA256, h256.Sum(nil)), h512.Sum(nil), nil
}

// String is the one line `mur verify FILE --bundle B` prints.
func (v VerifiedFile) String() string {
	if v.Provenance == nil {
		return fmt.Sprintf("%s %s: not verified", v.File, v.Digest)
	}
	f := v.Provenance
	if f.Kind == provenance.KindKey {
		return fmt.Sprintf("%s %s: verified against %s, signed by key %s", v.File, v.Digest, v.Bundle, f.Signer)
	}
	s := fmt.Sprintf("%s %s: verified against %s, attested by %s, repository %d", v.File, v.Digest, v.Bundle, f.Signer, f.RepoID)
	if f.Repository != "" {
		s += " (" + f.Repository + ")"
	}
	s += fmt.Sprintf(", owner %d", f.OwnerID)
	if f.SourceCommit != "" {
		s += ", commit " + f.SourceCommit
	}
	return s
}
