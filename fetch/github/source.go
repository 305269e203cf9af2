package github

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// maxIndexBytes bounds the index mur reads into memory; an index of 10,000 entries is ~3 MiB.
const maxIndexBytes = 32 << 20

// Source serves scopes from the GitHub releases of their repositories. It implements
// fetch.Source. It reads each scope's index and repository once for its life (one command), and
// its Client revalidates them with ETags across Sources.
type Source struct {
	c        *Client
	labels   func(scope string) string
	unmapped func(scope string) bool // see guess.go

	mu    sync.Mutex
	calls map[string]*call // "index:<scope>" and "repo:<owner>/<repo>"
}

// call coalesces concurrent look-ups of one key; a failed look-up is forgotten so that the next
// caller tries again.
type call struct {
	done chan struct{}
	val  any
	err  error
}

var _ store.Source = (*Source)(nil)

// NewSource returns a Source that asks c. labels maps a scope to github:owner/repo, or "" when no
// source serves it; nil means lock.DefaultSource.
func NewSource(c *Client, labels func(scope string) string) *Source {
	if labels == nil {
		labels = lock.DefaultSource
	}
	return &Source{c: c, labels: labels, calls: map[string]*call{}}
}

// Label is github:owner/repo of the repository serving scope, or false when none may serve it:
// scope local, a scope without a source, a malformed label, or scope murmur mapped anywhere but
// lock.MurmurSource.
func (s *Source) Label(scope string) (string, bool) {
	label, _, _, err := s.resolve(scope)
	return label, err == nil
}

func (s *Source) resolve(scope string) (label, owner, repo string, err error) {
	if err := lock.CheckScopeSource(scope, ""); err != nil {
		return "", "", "", errs.Wrap(err, errs.NotFound, "%s; give the .mur.zip file's path instead", errs.Message(err))
	}
	label = s.labels(scope)
	if label == "" {
		return "", "", "", errs.New(errs.NotFound, "no source serves scope %s; map it under sources: in config.yaml, e.g. %s: github:OWNER/REPO", scope, scope)
	}
	owner, repo, err = lock.ParseSource(label)
	if err != nil {
		return "", "", "", errs.Wrap(err, errs.InvalidConfig, "the source for scope %s: %s; fix it under sources: in config.yaml", scope, errs.Message(err))
	}
	if err := lock.CheckScopeSource(scope, label); err != nil {
		return "", "", "", errs.Wrap(err, errs.InvalidConfig, "%s (config.yaml maps it there); remove that entry, no other repository may serve it", errs.Message(err))
	}
	return label, owner, repo, nil
}

// once runs fn for key unless a call for it already succeeded or is in flight. Callers that
// waited on a failed call share its error, unless the call only failed because the context of
// the caller that ran it ended; then they try again with their own.
func (s *Source) once(ctx context.Context, key string, fn func() (any, error)) (any, error) {
	for {
		s.mu.Lock()
		c, ok := s.calls[key]
		if !ok {
			c = &call{done: make(chan struct{})}
			s.calls[key] = c
			s.mu.Unlock()
			c.val, c.err = fn()
			if c.err != nil {
				s.mu.Lock()
				delete(s.calls, key)
				s.mu.Unlock()
			}
			close(c.done)
			return c.val, c.err
		}
		s.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, errs.Wrap(ctx.Err(), errs.Network, "gave up waiting for GitHub: %v", ctx.Err())
		}
		leaderGaveUp := errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)
		if c.err == nil || !leaderGaveUp || ctx.Err() != nil {
			return c.val, c.err
		}
	}
}

// scopeIndex is an index with the release that carries it.
type scopeIndex struct {
	ix     *Index
	latest *Release
}

// Index is the murmur-index.json on the latest release of scope's repository, checked to be for
// scope. The caller must not modify it.
func (s *Source) Index(ctx context.Context, scope string) (*Index, error) {
	si, _, err := s.index(ctx, s.c, scope)
	if err != nil {
		return nil, err
	}
	return si.ix, nil
}

func (s *Source) index(ctx context.Context, c *Client, scope string) (*scopeIndex, string, error) {
	label, owner, repo, err := s.resolve(scope)
	if err != nil {
		return nil, "", err
	}
	guess := c.oneTry
	v, err := s.once(ctx, "index:"+scope, func() (any, error) {
		rel, err := c.LatestRelease(ctx, owner, repo)
		if guess {
			err = notReachable(err, scope, label)
		}
		if errors.Is(err, errs.NotFound) {
			return nil, errs.Wrap(err, errs.NotFound, "%s, the source of scope %s, has no published release, so it has no index (%s); its publisher must release one with a %s asset, or fix the repository under sources: in config.yaml", label, scope, errs.Message(err), IndexAssetName)
		}
		if err != nil {
			return nil, err
		}
		a, ok := rel.Asset(IndexAssetName)
		if !ok {
			return nil, errs.New(errs.NotFound, "the latest release %s of %s (the source of scope %s) has no %s asset; its publisher must write one with mur index and attach it to the latest release", rel.TagName, label, scope, IndexAssetName)
		}
		// The repository says whether its assets need the token; Fetch needs it next anyway.
		r, err := s.repo(ctx, c, owner, repo)
		if err != nil {
			return nil, err
		}
		data, err := c.smallAsset(ctx, owner, repo, a, r.NeedsToken(), maxIndexBytes)
		if err != nil {
			return nil, err
		}
		ix, err := ParseIndex(data)
		if err != nil {
			return nil, errs.Wrap(err, errs.IndexMismatch, "%s on release %s of %s: %s", IndexAssetName, rel.TagName, label, errs.Message(err))
		}
		if ix.Scope != scope {
			return nil, errs.New(errs.IndexMismatch, "%s on release %s of %s is for scope %q, not %q; either config.yaml maps %s to the wrong repository or its publisher must fix the index", IndexAssetName, rel.TagName, label, ix.Scope, scope, scope)
		}
		return &scopeIndex{ix: ix, latest: rel}, nil
	})
	if err != nil {
		return nil, label, err
	}
	return v.(*scopeIndex), label, nil
}

func (s *Source) repo(ctx context.Context, c *Client, owner, repo string) (*Repository, error) {
	v, err := s.once(ctx, "repo:"+strings.ToLower(owner+"/"+repo), func() (any, error) {
		return c.Repo(ctx, owner, repo)
	})
	if err != nil {
		return nil, err
	}
	return v.(*Repository), nil
}

// resolved is an index entry that passed the checks made before any download.
type resolved struct {
	si          *scopeIndex
	label       string
	owner, repo string
	where       string
	entry       IndexEntry
	gh          *Repository // whether its assets need the API and the token
	newPin      *lock.ScopePin
	listed      []string // for "latest": the versions the index lists for the name and platform
}

func (r *resolved) sourced(name ref.Name, got digest.Digest) store.Sourced {
	return store.Sourced{
		Descriptor: store.Descriptor{
			Name:     name,
			Version:  r.entry.Version,
			Platform: r.entry.Platform,
			Digest:   got,
			Size:     r.entry.Size,
			Origin:   r.label,
			Title:    r.entry.Asset,
			Private:  r.gh.Private || (r.gh.Visibility != "" && r.gh.Visibility != "public"),
			Versions: r.listed,
		},
		Release: r.entry.Release,
		Asset:   r.entry.Asset,
		OwnerID: r.gh.Owner.ID,
		RepoID:  r.gh.ID,
		NewPin:  r.newPin,
	}
}

// resolveEntry makes the checks of SPEC section 8 that come before a download: the index is for
// the scope; it lists the name, version and platform (the exact platform, then any); and the
// repository's owner id equals pin's (or, without a pin, the result carries a NewPin).
func (s *Source) resolveEntry(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (*resolved, error) {
	if err := ref.ValidatePlatform(platform); err != nil {
		return nil, err
	}
	c := s.c
	if s.guessed(name.Scope, pin) {
		c = c.guessing()
	}
	si, label, err := s.index(ctx, c, name.Scope)
	if err != nil {
		return nil, err
	}
	_, owner, repo, _ := s.resolve(name.Scope)
	r := &resolved{si: si, label: label, owner: owner, repo: repo, where: "the index on release " + si.latest.TagName + " of " + label}
	entry, ok := si.ix.Lookup(name.String(), version, platform)
	if !ok {
		return nil, s.missing(si.ix, r.where, name, version, platform)
	}
	r.entry = entry
	if strings.EqualFold(version, ref.Latest) {
		for _, e := range si.ix.Artifacts {
			if e.Name == name.String() && (e.Platform == platform || e.Platform == ref.PlatformAny) && !slices.Contains(r.listed, e.Version) {
				r.listed = append(r.listed, e.Version)
			}
		}
	}
	gh, err := s.repo(ctx, c, owner, repo)
	if err != nil {
		return nil, err
	}
	if pin != nil {
		if err := pin.CheckOwner(name.Scope, label, gh.Owner.ID); err != nil {
			return nil, err
		}
	} else {
		r.newPin = &lock.ScopePin{Source: label, OwnerID: gh.Owner.ID, RepoID: gh.ID}
	}
	r.gh = gh
	return r, nil
}

// Resolve finds name@version for platform in the scope's index and makes every check that comes
// before a download (see resolveEntry), without downloading: the pipeline takes the payload from
// the CAS when it already holds the entry's digest.
func (s *Source) Resolve(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (store.Sourced, error) {
	r, err := s.resolveEntry(ctx, name, version, platform, pin)
	if err != nil {
		return store.Sourced{}, err
	}
	// ParseIndex accepted only 64 lowercase hex digits.
	d, _ := ref.DigestFromHex(r.entry.SHA256)
	return r.sourced(name, d), nil
}

// Fetch downloads name@version for platform into scratch and checks it against the index, in the
// order of SPEC section 8: the checks of Resolve; the entry's release holds its asset; and the
// bytes have the entry's size and SHA-256 and GitHub's own digest. The download is bounded by the
// index's size: one byte more stops it. It writes nothing but scratch, which the caller discards
// on error. The packed manifest and the lock's digest are the pipeline's to check.
func (s *Source) Fetch(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin, scratch store.Scratch) (store.Sourced, error) {
	r, err := s.resolveEntry(ctx, name, version, platform, pin)
	if err != nil {
		return store.Sourced{}, err
	}
	entry, label, owner, repo, where := r.entry, r.label, r.owner, r.repo, r.where
	what := name.String() + "@" + entry.Version

	rel := r.si.latest
	if entry.Release != rel.TagName {
		rel, err = s.c.ReleaseByTag(ctx, owner, repo, entry.Release)
		if errors.Is(err, errs.NotFound) {
			return store.Sourced{}, errs.New(errs.IndexMismatch, "%s lists %s as asset %s of release %s, but %s has no such release; its publisher must fix the index", where, what, entry.Asset, entry.Release, label)
		}
		if err != nil {
			return store.Sourced{}, err
		}
	}
	asset, ok := rel.Asset(entry.Asset)
	if !ok {
		return store.Sourced{}, errs.New(errs.IndexMismatch, "%s lists %s as asset %s of release %s, but that release has no such asset (it has %s); its publisher must fix the index", where, what, entry.Asset, entry.Release, assetNames(rel))
	}
	from := label + " (release " + entry.Release + ", asset " + entry.Asset + ")"
	if asset.Size != entry.Size {
		return store.Sourced{}, errs.New(errs.Integrity, "%s from %s: GitHub says the asset is %d bytes, but the index says %d; the asset changed after the index was written, so nothing was installed; tell its publisher", what, from, asset.Size, entry.Size)
	}

	if rs, ok := scratch.(download.Fillable); ok {
		// The pipeline's scratch: it continues what an earlier pull kept, resumes a body that
		// breaks off, and fetches a large asset over several connections.
		if err := rs.Fill(ctx, s.c.AssetRanger(owner, repo, asset, r.gh.NeedsToken())); err != nil {
			return store.Sourced{}, err
		}
	} else if _, err := s.c.DownloadAsset(ctx, owner, repo, asset, r.gh.NeedsToken(), entry.Size, scratch); err != nil {
		return store.Sourced{}, err
	}
	if got := scratch.Size(); got != entry.Size {
		found := "is " + strconv.FormatInt(got, 10) + " bytes"
		if got > entry.Size {
			found = "is longer than " + strconv.FormatInt(entry.Size, 10) + " bytes"
		}
		return store.Sourced{}, errs.New(errs.Integrity, "%s from %s %s, but the index says %d; nothing was installed; retry, and tell its publisher if it persists", what, from, found, entry.Size)
	}
	got := scratch.Digest()
	if got.Encoded() != entry.SHA256 {
		return store.Sourced{}, errs.New(errs.Integrity, "%s from %s has sha256 %s, but the index says %s; the asset was replaced or corrupted, so nothing was installed; tell its publisher", what, from, got.Encoded(), entry.SHA256)
	}
	if want, bad := githubDigestMismatch(asset, got); bad {
		return store.Sourced{}, errs.New(errs.Integrity, "%s from %s has %s, but GitHub's digest for the asset is %s; nothing was installed; tell its publisher", what, from, got, want)
	}
	return r.sourced(name, got), nil
}

// missing explains a failed look-up, listing what the index has for the name.
func (s *Source) missing(ix *Index, where string, name ref.Name, version, platform string) error {
	have := ix.versionsOf(name.String())
	if len(have) == 0 {
		var names []string
		for _, e := range ix.Artifacts {
			names = append(names, e.Name)
		}
		if c := ref.Closest(name.String(), names); c != "" {
			return errs.New(errs.NotFound, "%s lists no version of %s; did you mean %s?", where, name, c)
		}
		return errs.New(errs.NotFound, "%s lists no version of %s; check the name, or ask its publisher to release it", where, name)
	}
	list := strings.Join(have, ", ")
	if len(have) > ref.ShownVersions {
		var versions []string
		for _, e := range ix.Artifacts {
			if e.Name == name.String() && !slices.Contains(versions, e.Version) {
				versions = append(versions, e.Version)
			}
		}
		list = ref.ListVersions(versions)
	}
	if strings.EqualFold(version, ref.Latest) {
		var usable []string
		for _, e := range ix.Artifacts {
			if e.Name == name.String() && (e.Platform == platform || e.Platform == ref.PlatformAny) {
				usable = append(usable, e.Version)
			}
		}
		if len(usable) > 0 {
			return errs.New(errs.Usage, "%s lists no semantic version of %s for %s, so latest means nothing (it lists %s); ask for one explicitly, e.g. %s@%s", where, name, platform, list, name, usable[0])
		}
		return errs.New(errs.NotFound, "%s has no %s for platform %s (it lists %s); a payload for another platform is never used", where, name, platform, list)
	}
	var versions []string
	for _, e := range ix.Artifacts {
		if e.Name == name.String() && !slices.Contains(versions, e.Version) {
			versions = append(versions, e.Version)
		}
	}
	if v := ref.DropV(version, versions); v != "" {
		return errs.New(errs.NotFound, "%s has no %s@%s; it lists, newest first: %s; drop the v: %s@%s", where, name, version, ref.ListVersions(versions), name, v)
	}
	if !slices.Contains(versions, version) {
		return errs.New(errs.NotFound, "%s has no %s@%s; it lists, newest first: %s; pick one of those, or ask its publisher to release it", where, name, version, ref.ListVersions(versions))
	}
	return errs.New(errs.NotFound, "%s has no %s@%s for platform %s (it lists %s); pick one of those, or ask its publisher to release it", where, name, version, platform, list)
}

func assetNames(rel *Release) string {
	if len(rel.Assets) == 0 {
		return "no assets"
	}
	names := make([]string, len(rel.Assets))
	for i, a := range rel.Assets {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// githubDigestMismatch compares GitHub's own digest of an asset, where it has one in sha256,
// with what was downloaded.
func githubDigestMismatch(a Asset, got digest.Digest) (want string, mismatch bool) {
	if a.Digest == "" {
		return "", false
	}
	d, err := digest.Parse(a.Digest)
	if err != nil || d.Algorithm() != digest.SHA256 {
		// A digest mur can't read is no evidence either way; the index's SHA-256 still holds.
		return "", false
	}
	return a.Digest, d != got
}

func checkGitHubDigest(a Asset, owner, repo string, data []byte) error {
	sum := sha256.Sum256(data)
	got := digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(sum[:]))
	if want, bad := githubDigestMismatch(a, got); bad {
		return errs.New(errs.Integrity, "asset %s in %s/%s has %s, but GitHub's digest for it is %s; retry, and tell its publisher if it persists", a.Name, owner, repo, got, want)
	}
	return nil
}
