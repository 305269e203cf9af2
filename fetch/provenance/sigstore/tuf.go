package sigstore

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// GitHub's TUF root, version 3, as gh embeds it (cli/cli
// pkg/cmd/attestation/verification/embed/tuf-repo.github.com/root.json): the first root of
// trust of GitHub's instance. It has expired, which TUF allows of a first root: each newer root
// that the repository serves must be signed by a threshold of its predecessor's keys, and only
// the newest must be current. The public-good instance's first root is the one sigstore-go embeds.
//
//go:embed roots/tuf-repo.github.com.root.json
var githubTUFRoot []byte

const (
	// refreshEvery is how often a verify may refresh the roots through TUF, whether the last
	// attempt worked or not: a machine without network pays for one failed attempt a day.
	refreshEvery = 24 * time.Hour
	// expiredRetry is how soon a verify tries again once the cached TUF metadata has expired.
	expiredRetry = time.Hour
	// onUseBudget bounds a refresh that a verify starts, for both instances together: a pull
	// must never wait on an unreachable TUF repository for longer than this.
	onUseBudget = 5 * time.Second
	// targetName is the TUF target that holds an instance's Sigstore trusted root.
	targetName = "trusted_root.json"
	// maxStateFile bounds state.json, a few hundred bytes.
	maxStateFile = 64 << 10
)

// tufSource is one instance's TUF repository, its first root of trust and the trusted root this
// mur embeds for when there is no cache.
type tufSource struct {
	instance string
	url      string
	tufRoot  []byte
	embedded []byte
}

// tufSources are the instances of provenance.Instances, with the repositories of cache.Repos
// in place of the defaults. A replaced first root is read as the home's trusted_root is: a
// regular file of at most 1 MiB, never quoted.
func tufSources(cache *provenance.RootsCache) ([]tufSource, error) {
	srcs := []tufSource{
		{provenance.InstancePublicGood, tuf.DefaultMirror, tuf.DefaultRoot(), publicGoodRoot},
		{provenance.InstanceGitHub, "https://tuf-repo.github.com", githubTUFRoot, githubRoot},
	}
	for _, r := range cache.Repos {
		i := 0
		for i < len(srcs) && srcs[i].instance != r.Instance {
			i++
		}
		if i == len(srcs) {
			return nil, errs.New(errs.InvalidConfig, "tuf_repositories names the instance %q, and mur knows %s and %s", clean(r.Instance), provenance.InstancePublicGood, provenance.InstanceGitHub)
		}
		data, err := safefile.ReadFile(r.Root, maxRootFile)
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "tuf_repositories.%s.root %s can't be read as a regular file of at most %d bytes: %v; fix the path in $MURMUR_HOME/config.yaml", r.Instance, r.Root, maxRootFile, errs.OSCause(err))
		}
		srcs[i].url, srcs[i].tufRoot = r.URL, data
	}
	return srcs, nil
}

// refresh fetches the instance's trusted root through TUF, within ctx's deadline, and keeps it
// with its metadata as the next generation (tufcache.go). A refresh that fails, or is killed at
// any point, leaves the generation in use as it was. Unless forced, it does nothing when another
// process refreshed while this one waited for the lock.
func (c instanceCache) refresh(ctx context.Context, force bool) (status provenance.RootStatus, err error) {
	old, oldSource := c.inUse()
	status = provenance.RootStatus{Instance: c.src.instance, Source: oldSource, Summary: summary(old), Repository: c.src.url}
	if err := c.checkDir(); err != nil {
		return status, err
	}
	if err := atomicfile.MkdirPrivate(c.dir); err != nil {
		return status, err
	}
	unlock, err := lockedfile.Lock(ctx, filepath.Join(c.dir, "lock"))
	if err != nil {
		return status, errs.Wrap(err, errs.IO, "can't lock %s's trusted root cache in %s: %v", c.src.instance, c.dir, err)
	}
	defer unlock()
	st := c.state()
	c.sweep(st)
	if !force && !st.due(time.Now()) {
		return status, nil
	}
	st.Attempted = time.Now()
	saved := false
	defer func() {
		if !saved {
			c.saveState(st) // the attempt, so that a failing repository is tried once a day
		}
	}()
	stage, err := os.MkdirTemp(c.dir, ".refresh-")
	if err != nil {
		return status, errs.Wrap(err, errs.IO, "can't stage a refresh of %s's trusted root in %s: %v", c.src.instance, c.dir, err)
	}
	defer os.RemoveAll(stage)
	data, meta, err := c.fetch(ctx, st, stage)
	if err != nil {
		return status, err
	}
	c.mark("fetched")
	next, err := c.commit(stage, data)
	if err != nil {
		return status, err
	}
	c.mark("renamed")
	was := st
	st.Current, st.Fetched, st.Expires, st.TimestampVersion = next, st.Attempted, meta.expires, meta.timestampVersion
	if err := c.saveState(st); err != nil {
		st = was // the new generation is named nowhere: the next refresh sweeps it
		return status, err
	}
	saved = true
	c.mark("swapped")
	c.sweep(st)
	status.Source, status.Fetched = "tuf", st.Fetched
	if !sameJSON(old, data) {
		status.Changed, status.Was, status.Summary = true, status.Summary, summary(data)
	}
	return status, nil
}

// fetch updates, in stage, the metadata of st's generation through TUF and returns the trusted
// root it vouches for and what the metadata says of itself. The metadata TUF starts from is the
// generation's, so that the repository can't roll it back to older versions; and should that
// metadata be lost, the timestamp version state.json recorded still holds.
func (c instanceCache) fetch(ctx context.Context, st cacheState, stage string) ([]byte, tufMeta, error) {
	gen, err := c.generation(st)
	if err != nil {
		return nil, tufMeta{}, err
	}
	if err := os.CopyFS(filepath.Join(stage, "tuf"), os.DirFS(filepath.Join(gen, "tuf"))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, tufMeta{}, errs.Wrap(err, errs.IO, "can't copy %s's TUF metadata out of %s: %v", c.src.instance, gen, err)
	}
	client, err := tuf.New(&tuf.Options{
		Root: c.src.tufRoot, CachePath: filepath.Join(stage, "tuf"), RepositoryBaseURL: c.src.url,
		Fetcher: &boundedFetcher{ctx: ctx, client: &http.Client{}},
	})
	var data []byte
	if err == nil {
		data, err = client.GetTarget(targetName)
	}
	if err != nil {
		return nil, tufMeta{}, refreshError(c.src, err)
	}
	if why := notARoot(data, 1); why != "" {
		return nil, tufMeta{}, errs.New(errs.Integrity, "%s's TUF repository %s serves a %s that is not a Sigstore trusted root (%s); mur keeps the trusted root it had", c.src.instance, c.src.url, targetName, why)
	}
	if _, err := root.NewTrustedRootFromJSON(data); err != nil {
		return nil, tufMeta{}, errs.New(errs.Integrity, "%s's TUF repository %s serves a %s that does not parse as a Sigstore trusted root; mur keeps the trusted root it had", c.src.instance, c.src.url, targetName)
	}
	meta := readTUFMeta(filepath.Join(stage, "tuf", tuf.URLToPath(c.src.url)))
	if meta.timestampVersion < st.TimestampVersion {
		return nil, tufMeta{}, errs.New(errs.Integrity, "%s's TUF repository %s serves timestamp metadata version %d, older than version %d that this machine took before: a rollback, which TUF refuses; mur keeps the trusted root it had", c.src.instance, c.src.url, meta.timestampVersion, st.TimestampVersion)
	}
	return data, meta, nil
}

// refreshError is err, from go-tuf or the fetcher, with a token: network when the repository
// could not be read, integrity when what it served was refused.
func refreshError(src tufSource, err error) error {
	var fe *fetchError
	var he *metadata.ErrDownloadHTTP
	if errors.As(err, &fe) || errors.As(err, &he) {
		return errs.Wrap(err, errs.Network, "%s's TUF repository %s can't be reached (%s); mur keeps the trusted root it had", src.instance, src.url, clean(err.Error()))
	}
	return errs.Wrap(err, errs.Integrity, "%s's TUF repository %s served metadata that TUF refuses (%s); mur keeps the trusted root it had", src.instance, src.url, clean(err.Error()))
}

// tufMeta is what a refresh records of the metadata that vouched for its trusted root.
type tufMeta struct {
	expires          time.Time // the earliest expiry of the top-level metadata; zero if none reads
	timestampVersion int64
}

// readTUFMeta reads tufMeta from the metadata in dir.
func readTUFMeta(dir string) tufMeta {
	var m tufMeta
	for _, role := range []string{metadata.TIMESTAMP, metadata.SNAPSHOT, metadata.TARGETS} {
		var md struct {
			Signed struct {
				Expires time.Time `json:"expires"`
				Version int64     `json:"version"`
			} `json:"signed"`
		}
		data, err := safefile.ReadFile(filepath.Join(dir, role+".json"), 8<<20)
		if err != nil || json.Unmarshal(data, &md) != nil {
			continue
		}
		if e := md.Signed.Expires; m.expires.IsZero() || e.Before(m.expires) {
			m.expires = e
		}
		if role == metadata.TIMESTAMP {
			m.timestampVersion = md.Signed.Version
		}
	}
	return m
}

// sameJSON reports whether two trusted roots say the same, however they are laid out.
func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// summary counts what a trusted root holds, for `mur trust`.
func summary(raw []byte) string {
	tr, err := root.NewTrustedRootFromJSON(raw)
	if err != nil {
		return "unreadable"
	}
	return fmt.Sprintf("%s, %s, %s, %s",
		plural(len(tr.FulcioCertificateAuthorities()), "CA", "CAs"),
		plural(len(tr.RekorLogs()), "tlog key", "tlog keys"),
		plural(len(tr.CTLogs()), "CT log key", "CT log keys"),
		plural(len(tr.TimestampingAuthorities()), "TSA", "TSAs"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// fetchError is a TUF file that could not be read from the repository, as opposed to one that
// was read and refused.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// boundedFetcher is go-tuf's Fetcher with one attempt per file, held to ctx's deadline: go-tuf's
// own retries for minutes, which a pull can't afford.
type boundedFetcher struct {
	ctx    context.Context
	client *http.Client
}

func (f *boundedFetcher) DownloadFile(url string, maxLength int64, _ time.Duration) ([]byte, error) {
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, &fetchError{err}
	}
	req.Header.Set("User-Agent", "mur-provenance")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, &fetchError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// go-tuf reads a 404 or 403 on the next root version as "no newer root".
		return nil, &metadata.ErrDownloadHTTP{StatusCode: resp.StatusCode, URL: url}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxLength+1))
	if err != nil {
		return nil, &fetchError{err}
	}
	if int64(len(data)) > maxLength {
		return nil, &metadata.ErrDownloadLengthMismatch{Msg: fmt.Sprintf("%s is over the %d bytes its metadata allows", url, maxLength)}
	}
	return data, nil
}
