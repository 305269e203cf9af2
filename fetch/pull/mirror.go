package pull

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/publish"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// Write-through to a team registry. With a mirror set (mirror: in config.yaml, or --mirror), every
// artifact a pull or warm brings in from anywhere else (another store, a GitHub release) is pushed
// to the mirror after it is committed and pinned: the manifest shape of `mur push`, one push per
// platform pulled. The other machines of a fleet then pull from the mirror with the same lock and
// never ask GitHub.
//
// Decisions:
//   - A blob the CAS already held is pushed too, unless the pull records say it is in the mirror
//     already (a write-through, or a pull from the mirror itself): a machine whose cache predates
//     the mirror fills it, and a warm cache costs no request once the records know.
//   - A failed push is a warning and the pull succeeds; the records then hold no write-through,
//     so the next pull or warm tries again. With MirrorRequired the push's failure is the
//     command's, after the artifact is committed and pinned locally: the pull itself is whole,
//     and running the command again retries the push.
//   - A push looks before it writes: the tag, each blob, each bundle's manifest. A mirror that
//     holds the artifact already (a pull-through cache of the store it came from, another
//     machine's write-through) is written nothing.
//   - A mirror that refuses writes (405 from a pull-through cache, 403) is denied, said once per
//     command, and asked nothing more by it (mirror_denied.go).
//   - --offline pulls push nothing (mirroring is network use).
//   - The mirror is the operator's choice, not the project's. A mirror that only a project's
//     .murmur/config.yaml names (a cloned repository could name anyone's registry) never receives
//     an artifact that was fetched with the user's credentials (a private repository, or a
//     registry that asked for auth), now or by an earlier pull as the records say; the pull
//     warns instead. Naming the same mirror in the home's config.yaml or with --mirror makes it
//     the operator's. Nor does it receive what came from a store the home names (an oci-layout
//     share, an intranet registry that needs no login), from a store named on the command
//     line or from a packed file: only what the project's own stores (Mirror.ProjectStores)
//     or a public source served, on this pull or, for a blob already here, on an earlier one
//     as the records say. The rest is said once per command and goes to the home's mirror
//     only.

// MirrorPush is the write-through of one artifact.
type MirrorPush struct {
	Store  string `json:"store"`
	Pushed bool   `json:"pushed"`
	Error  string `json:"error,omitempty"`
	Token  string `json:"token,omitempty"` // Error's token
}

// mirrorLedger is what the pull records say the mirror holds, read once per Pull.
type mirrorLedger struct {
	once    sync.Once
	mu      sync.Mutex
	has     map[digest.Digest]bool
	private map[digest.Digest]bool     // fetched with credentials by some pull
	origins map[digest.Digest][]string // where pulls fetched it from
}

// mirrorWriter writes what one Pull brings in through to the mirror (see above).
type mirrorWriter struct {
	cas     *cas.Store
	mirror  Mirror
	offline bool
	health  *StoreHealth // whose writes say what each mirror answered this process's first write
	report  Report
	now     func() time.Time
	run     *run
	seen    *mirrorLedger // what the pull records say the mirror holds
}

// mirrorWriter is the write-through of one Pull, whose open set p's health; nil when no mirror
// is set.
func (p *Puller) mirrorWriter() *mirrorWriter {
	if p.Mirror.Store == nil {
		return nil
	}
	return &mirrorWriter{cas: p.CAS, mirror: p.Mirror, offline: p.Offline, health: p.Chain.Health, report: p.Report, now: p.now, run: p.run, seen: &mirrorLedger{}}
}

func (m *mirrorLedger) read(store *cas.Store, mirror string) {
	m.once.Do(func() {
		m.has, m.private, m.origins = map[digest.Digest]bool{}, map[digest.Digest]bool{}, map[digest.Digest][]string{}
		recs, _ := store.Records("") // unreadable records only cost a push that finds the blob there
		for _, r := range recs {
			if r.Private {
				m.private[r.Digest] = true
			}
			if r.Outcome == cas.OutcomePulled && r.Digest != "" {
				m.origins[r.Digest] = append(m.origins[r.Digest], r.Source)
			}
			if r.Digest != "" && r.Source == mirror && (r.Outcome == cas.OutcomeMirrored || r.Outcome == cas.OutcomePulled) {
				m.has[r.Digest] = true
			}
		}
	})
}

// privateBlob reports whether some pull fetched d with the user's credentials.
func (m *mirrorLedger) privateBlob(store *cas.Store, mirror string, d digest.Digest) bool {
	m.read(store, mirror)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.private[d]
}

// fetchedFrom is where the pulls the records know fetched d from.
func (m *mirrorLedger) fetchedFrom(store *cas.Store, mirror string, d digest.Digest) []string {
	m.read(store, mirror)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.origins[d]
}

func (m *mirrorLedger) holds(store *cas.Store, mirror string, d digest.Digest) bool {
	m.read(store, mirror)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.has[d]
}

func (m *mirrorLedger) add(d digest.Digest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.has[d] = true
}

// writeThrough pushes a pulled artifact to the mirror (see above). It returns an error only when
// MirrorRequired. A nil mw writes nothing.
func (mw *mirrorWriter) writeThrough(ctx context.Context, req Request, res *Result) error {
	if mw == nil || res.Digest == "" {
		return nil
	}
	addr := mw.mirror.Store.String()
	d := digest.Digest(res.Digest)
	if res.Origin == addr || mw.seen.holds(mw.cas, addr, d) {
		return nil
	}
	if mw.offline {
		return nil
	}
	if mw.mirror.FromProject && (res.private || mw.seen.privateBlob(mw.cas, addr, d)) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("not written through to the mirror %s: only this project's .murmur/config.yaml names it, and %s@%s was fetched with your credentials (a private repository, or a registry that asked for auth); a cloned project does not choose where private artifacts go: name the mirror in $MURMUR_HOME/config.yaml or pass --mirror to write it through", addr, req.Name, res.Version))
		return nil
	}
	if mw.mirror.FromProject && !mw.projectMayShare(res, addr, d) {
		if mw.health.writes.firstTime(addr, "not the project's") {
			mw.report.warnf("not written through to the mirror %s, which only this project's .murmur/config.yaml names: %s@%s (and any other such artifact of this command) came from a store of your own (your home's config.yaml, --store or a file) rather than from one the project names or a public source; a cloned project does not choose where they go: name the mirror in $MURMUR_HOME/config.yaml or pass --mirror to write them through", addr, req.Name, res.Version)
		}
		// Told once, above; --json shows each artifact kept back, with the policy's token.
		res.Mirror = &MirrorPush{Store: addr, Error: "not written: it came from a store of your own, and only this project's config names the mirror", Token: string(errs.Denied)}
		return nil
	}
	desc := fstore.Descriptor{
		Name: req.Name, Version: res.Version, Platform: res.Platform, Digest: d, Size: res.Size,
		Title: artifact.FileName(req.Name.Name, res.Version),
	}
	writes := &mw.health.writes
	probe, refused, err := writes.enter(ctx, addr)
	own := false // this artifact's own write was refused, not an earlier one
	if err == nil && refused == nil {
		// The store looks before it writes (the tag, each blob, each bundle's manifest), so a
		// mirror that holds all of it already is written nothing and can refuse nothing.
		err = publish.Push(ctx, mw.mirror.Store, publish.Item{CAS: mw.cas, Desc: desc})
		if errs.TokenOf(err) == errs.Denied {
			refused, err, own = err, nil, true
		}
		if writes.settle(addr, probe, refused) && !mw.mirror.Required {
			// One line for the command; with mirror_required each artifact's failure says it.
			mw.report.warnf("the mirror %s refused a write: %s; nothing more is written through to it by this command (the next pull or warm tries again); a pull-through cache, or a registry you may only read, belongs under stores:, not mirror: (docs/fleets.md)", addr, errs.Message(refused))
		}
	}
	if err == nil && refused == nil {
		mw.seen.add(d)
		res.Mirror = &MirrorPush{Store: addr, Pushed: true}
		// A record that can't be written costs one more push, which finds the blob there.
		mw.run.appendRecord(mw.cas, cas.Record{
			Time: mw.now().UTC(), Ref: req.Asked, Name: req.Name.String(), Version: res.Version, Platform: res.Platform,
			Digest: d, Size: res.Size, Source: addr, Transferred: res.Size, Outcome: cas.OutcomeMirrored,
		})
		return nil
	}
	if refused != nil {
		// Said once for the command (above); the result still tells --json which were not written.
		msg := errs.Message(refused)
		if !own {
			msg = "not tried: the mirror refused an earlier write of this command: " + msg
		}
		res.Mirror = &MirrorPush{Store: addr, Error: msg, Token: string(errs.Denied)}
		if mw.mirror.Required {
			return errs.Wrap(refused, errs.Denied, "%s@%s is pulled and pinned here, but the mirror %s refuses writes (%s); mirror_required is set, so this fails the command: give these credentials push access to the mirror, or name a registry that accepts pushes (a pull-through cache is a store, not a mirror)",
				req.Name, res.Version, addr, errs.Message(refused))
		}
		return nil
	}
	res.Mirror = &MirrorPush{Store: addr, Error: errs.Message(err), Token: string(errs.TokenOf(err))}
	if mw.mirror.Required {
		return errs.Wrap(err, errs.TokenOf(err), "%s@%s is pulled and pinned here, but writing it through to the mirror %s failed: %s; mirror_required is set, so this fails the command: fix the mirror and run it again, which retries the push",
			req.Name, res.Version, addr, errs.Message(err))
	}
	res.Warnings = append(res.Warnings, fmt.Sprintf("not written through to the mirror %s: %s; the next pull or warm tries again", addr, errs.Message(err)))
	return nil
}

// projectMayShare reports whether a mirror only the project names may receive res: what this pull
// fetched came from one of the project's own stores or a public source, or, for a blob the CAS
// held, some pull the records know did.
func (mw *mirrorWriter) projectMayShare(res *Result, addr string, d digest.Digest) bool {
	shared := func(origin string) bool {
		if mw.mirror.ProjectStores[origin] {
			return true
		}
		_, _, err := lock.ParseSource(origin) // a source; private ones are refused above
		return err == nil
	}
	if res.Origin != "cas" {
		return shared(res.Origin)
	}
	return slices.ContainsFunc(mw.seen.fetchedFrom(mw.cas, addr, d), shared)
}
