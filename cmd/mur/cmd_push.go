package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func pushCmd() *command {
	var (
		store     string
		scope     string
		platform  string
		plainHTTP bool
		signKey   string
	)
	return &command{
		name:  "push",
		args:  "(REF | FILE.mur.zip --scope SCOPE) --store STORE",
		short: "publish an artifact to a registry or layout store",
		long: `'mur push acme/grep@1.2.0 --store STORE' publishes what the CAS holds for the pinned
version (mirroring it with the same digest). 'mur push FILE.mur.zip --scope acme --store STORE'
publishes a packed file under scope/name@version from its own murmur.yaml. A version the store
already holds with another digest is refused. A platform-specific payload's layer is titled
name-version-platform.mur.zip, so that oras can pull every platform of an index into one folder.`,
		examples: `mur push grep-1.2.0.mur.zip --scope acme --store oci://registry.internal:5000/murmur
mur push grep-1.2.0.mur.zip --scope acme --platform linux-x86_64 --store oci-layout:./store
mur push acme/grep@1.2.0 --store oci://mirror.internal/murmur     # mirror what the lock pins
mur push grep-1.2.0.mur.zip --scope acme --plain-http --store oci://registry:5000/murmur
mur push grep-1.2.0.mur.zip --scope acme --sign-key team.key --store oci://registry.internal:5000/murmur`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&store, "store", "", "the store: oci://HOST[:PORT]/PREFIX or oci-layout:PATH (required)")
			fs.StringVar(&scope, "scope", "", "the scope to publish a file under")
			fs.StringVar(&platform, "platform", ref.PlatformAny, "the payload's platform")
			fs.BoolVar(&plainHTTP, "plain-http", false, "speak plain HTTP to the --store registry (never automatic off loopback)")
			fs.StringVar(&signKey, "sign-key", "", "sign with this ECDSA P-256 or Ed25519 private key (PEM) and attach the Sigstore bundle as a referrer")
		},
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur push takes one REF or FILE.mur.zip, found %d arguments", len(args))
			}
			if store == "" {
				return usagef("mur push needs --store oci://HOST[:PORT]/PREFIX or --store oci-layout:PATH")
			}
			if err := checkPlatform(&platform, false); err != nil {
				return err
			}
			if e.Offline() {
				return errs.New(errs.Offline, "mur push needs the network to reach %s, and --offline or MUR_OFFLINE forbids it", store)
			}
			p, err := e.openProject()
			if err != nil {
				return err
			}
			store = fetch.CleanStoreAddress(store)
			if err := fetch.ValidateStoreAddress(store); err != nil {
				return err
			}
			opt := storeOptions()
			opt.PlainHTTP = plainHTTP
			dst, err := ocistore.Open(resolveStoreArg(store), opt)
			if err != nil {
				return err
			}
			var item fetch.PublishItem
			r, err := parseRef(args[0])
			if err != nil {
				return err
			}
			if r.IsFile() {
				if scope == "" {
					return usagef("pushing a file needs --scope, e.g. 'mur push %s --scope acme --store %s'", args[0], store)
				}
				item, err = fetch.PublishFile(r.Path, scope, platform)
			} else {
				if scope != "" {
					return usagef("--scope applies to files; %s already has scope %s", r.Name, r.Name.Scope)
				}
				cs, cerr := openCAS(p.home)
				if cerr != nil {
					return cerr
				}
				l, lerr := lock.Read(p.LockPath())
				if lerr != nil {
					return lerr
				}
				item, err = fetch.PublishFromCAS(cs, l, r, platform)
			}
			if err != nil {
				return err
			}
			hint := ""
			if signKey != "" {
				key, kerr := os.ReadFile(signKey)
				if kerr != nil {
					return errs.Wrap(kerr, errs.Usage, "--sign-key %s can't be read: %v", signKey, kerr)
				}
				if hint, err = fetch.Sign(e.ctx, e.verifier(), &item, key); err != nil {
					return err
				}
			}
			pr := newProgress(e.stderr, e.g.quiet || e.g.json, "push").watch(e)
			err = fetch.Publish(e.ctx, countingStore{Store: dst, name: item.Desc.Name.String(), p: pr}, item)
			pr.finish(err)
			if err != nil {
				return err
			}
			if e.g.json {
				return e.JSON(pushJSON{Name: item.Desc.Name.String(), Version: item.Desc.Version, Platform: item.Desc.Platform,
					Digest: string(item.Desc.Digest), Size: item.Desc.Size, Store: dst.String(), SignedWith: hint})
			}
			fmt.Fprintf(e.stdout, "pushed %s@%s %s (%s) to %s\n", item.Desc.Name, item.Desc.Version, item.Desc.Digest, item.Desc.Platform, dst)
			if hint != "" {
				fmt.Fprintf(e.stdout, "signed with key %s; trust it with trusted_keys: [{hint: %s, pem: <its public key>}]\n", hint, hint)
			}
			return nil
		},
	}
}

// countingStore reports a push's upload as it reads the payload.
type countingStore struct {
	fetch.Store
	name string
	p    *progress
}

func (c countingStore) Push(ctx context.Context, desc fetch.Descriptor, payload io.Reader) error {
	start := time.Now()
	c.p.event(fetch.Event{Name: c.name, Phase: phaseUpload, Total: desc.Size})
	cr := &countingReader{r: payload, report: func(n int64) {
		c.p.event(fetch.Event{Name: c.name, Phase: phaseUpload, Bytes: n, Total: desc.Size})
	}}
	if err := c.Store.Push(ctx, desc, cr); err != nil {
		c.p.event(fetch.Event{Name: c.name, Phase: fetch.PhaseFailed})
		return err
	}
	c.p.event(fetch.Event{Name: c.name, Phase: fetch.PhaseDone, Bytes: desc.Size, Total: desc.Size, From: c.String(), Elapsed: time.Since(start)})
	return nil
}

// AttachBundle passes a bundle through to the store, when it can hold one.
func (c countingStore) AttachBundle(ctx context.Context, n ref.Name, version string, d digest.Digest, bundle []byte) error {
	at, ok := c.Store.(fetch.BundleAttacher)
	if !ok {
		return errs.New(errs.Usage, "%s can't hold provenance bundles", c.Store)
	}
	return at.AttachBundle(ctx, n, version, d, bundle)
}

type countingReader struct {
	r      io.Reader
	n      int64
	report func(int64)
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	c.report(c.n)
	return n, err
}
