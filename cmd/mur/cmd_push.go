package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/publish"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func pushCmd() *command {
	var (
		store     string
		scope     string
		platform  platformFlag
		plainHTTP bool
		signKey   string
		bundleOut string
	)
	return &command{
		name:  "push",
		args:  "(REF... | FILE.mur.zip... --scope SCOPE) --store STORE",
		short: "publish an artifact to a registry or layout store",
		long: `'mur push acme/grep@1.2.0 --store STORE' publishes what the CAS holds for the pinned
version (mirroring it with the same digest). 'mur push FILE.mur.zip --scope acme --store STORE'
publishes a packed file under scope/name@version from its own murmur.yaml. A version the store
already holds with another digest is refused. A platform-specific payload's layer is titled
name-version-platform.mur.zip, so that oras can pull every platform of an index into one folder.

Several REFs or files are pushed one after the other, one line each; one that fails is named on
its own line, the others are still pushed, and the exit status is 1. The digest printed is that of
the OCI manifest, the one crane and oras address; the payload's digest follows on the next line.`,
		examples: `mur push grep-1.2.0.mur.zip --scope acme --store oci://registry.internal:5000/murmur
mur push grep-1.2.0.mur.zip --scope acme --platform linux-x86_64 --store oci-layout:./store
mur push acme/grep@1.2.0 --store oci://mirror.internal/murmur     # mirror what the lock pins
mur push grep-1.2.0.mur.zip sed-4.9.0.mur.zip --scope acme --store oci-layout:./store
mur push grep-1.2.0.mur.zip --scope acme --plain-http --store oci://registry:5000/murmur
mur push grep-1.2.0.mur.zip --scope acme --sign-key team.key --store oci://registry.internal:5000/murmur
mur push grep-1.2.0.mur.zip --scope acme --sign-key team.key --bundle-out grep.sigstore.json --store oci-layout:./store`,
		flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&store, "store", "", "the store: oci://HOST[:PORT]/PREFIX or oci-layout:PATH (required)")
			fs.StringVar(&scope, "scope", "", "the scope to publish a file under")
			platform.registerPayload(fs)
			fs.BoolVar(&plainHTTP, "plain-http", false, "speak plain HTTP to the --store registry (never automatic off loopback)")
			fs.StringVar(&signKey, "sign-key", "", "sign with this ECDSA P-256 or Ed25519 private key (PEM, as 'mur key generate' writes it) and attach the Sigstore bundle as a referrer")
			fs.StringVar(&bundleOut, "bundle-out", "", "also write the bundle --sign-key made to this file, for 'mur verify FILE --bundle' or cosign")
		},
		run: func(e *env, args []string) error {
			if len(args) == 0 {
				return usagef("mur push takes one or more REFs or FILE.mur.zip files, found none; e.g. 'mur push grep-1.2.0.mur.zip --scope acme --store oci-layout:./store'")
			}
			if store == "" {
				return usagef("mur push needs --store oci://HOST[:PORT]/PREFIX or --store oci-layout:PATH")
			}
			if bundleOut != "" && (signKey == "" || len(args) != 1) {
				return usagef("--bundle-out writes the bundle --sign-key makes for one artifact; give --sign-key KEY and one REF or file")
			}
			if err := platform.check(); err != nil {
				return err
			}
			store = fstore.CleanStoreAddress(store)
			if err := fstore.ValidateStoreAddress(store); err != nil {
				return err
			}
			if e.Offline() && !strings.HasPrefix(store, fstore.SchemeOCILayout) {
				// A layout folder is no network: offline, push writes it as warm --layout does.
				return errs.New(errs.Offline, "mur push needs the network to reach %s, and --offline or MUR_OFFLINE forbids it; an oci-layout:PATH store needs none", store)
			}
			p, err := e.openProject()
			if err != nil {
				return err
			}
			dst, err := fetch.OpenStore(resolveStoreArg(store), plainHTTP, fetch.Network{Timeout: networkTimeout()})
			if err != nil {
				return err
			}
			var key []byte
			if signKey != "" {
				if key, err = readSignKey(signKey); err != nil {
					return err
				}
			}
			pu := &pusher{e: e, p: p, dst: dst, scope: scope, platform: platform.value, key: key, bundleOut: bundleOut, several: len(args) > 1}
			pr := newProgress(e.stderr, e.g.quiet || e.g.json, "push").watch(e)
			pu.pr = pr
			results := make([]pushResult, len(args))
			var first error
			for i, arg := range args {
				results[i] = pu.push(arg)
				if results[i].err != nil && first == nil {
					first = results[i].err
				}
			}
			pr.finish(first)
			if e.g.json {
				return jsonThen(e, struct {
					Results []pushResult `json:"results"`
				}{results}, first)
			}
			printPushed(e, results, first)
			printTrustSnippet(e, results, signKey, key)
			return first
		},
	}
}

// printPushed says what each argument of mur push published. Each failed one gets its own line,
// with its own token; the first failure is the command's error, printed last.
func printPushed(e *env, results []pushResult, first error) {
	for _, r := range results {
		if r.err != nil && r.err != first {
			fmt.Fprintf(e.stderr, "mur: %s: %s\n", errs.TokenOf(r.err), errs.Message(r.err))
		}
	}
	for _, r := range results {
		if r.err != nil {
			continue
		}
		fmt.Fprintf(e.stdout, "pushed %s@%s %s (%s) to %s\n", r.Name, r.Version, r.Manifest, r.Platform, r.Store)
		fmt.Fprintf(e.stdout, "  payload %s (%d bytes)", r.Digest, r.Size)
		if r.Index != "" {
			fmt.Fprintf(e.stdout, "; the tag's index is %s", r.Index)
		}
		fmt.Fprintln(e.stdout)
		if r.SignedWith != "" {
			fmt.Fprintf(e.stdout, "  signed with key %s\n", r.SignedWith)
		}
		if r.BundleFile != "" {
			fmt.Fprintf(e.stdout, "  wrote its bundle to %s\n", r.BundleFile)
		}
	}
}

// readSignKey reads --sign-key and checks it is a private key mur signs with, before anything
// is pushed: a wrong file gets a sentence, not a parser's dump, and nothing half-published.
func readSignKey(path string) ([]byte, error) {
	key, err := readKeyFile(path)
	if err != nil {
		return nil, errs.Wrap(err, errs.Usage, "--sign-key %s can't be read: %v; give the private key file (NAME.key of 'mur key generate NAME')", path, err)
	}
	if _, err := provenance.ParsePrivateKey(key); err != nil {
		return nil, errs.Wrap(err, errs.Usage, "--sign-key %s can't sign: %v", path, err)
	}
	return key, nil
}

// printTrustSnippet prints, once per scope signed for, the config.yaml lines a consumer adds to
// trust the key: the same lines as mur key generate, with the key's .pub when it lies beside
// the private key, else the public key inline.
func printTrustSnippet(e *env, results []pushResult, keyPath string, key []byte) {
	hint, scopes := "", []string{}
	for _, r := range results {
		if r.err != nil || r.SignedWith == "" {
			continue
		}
		hint = r.SignedWith
		scope, _, _ := strings.Cut(r.Name, "/")
		if !slices.Contains(scopes, scope) {
			scopes = append(scopes, scope)
		}
	}
	if hint == "" {
		return
	}
	priv, err := provenance.ParsePrivateKey(key)
	if err != nil {
		return
	}
	pubPEM, err := provenance.PublicPEM(priv.Public())
	if err != nil {
		return
	}
	pubFile := siblingPublicKey(keyPath, hint)
	fmt.Fprintln(e.stdout, "# to trust the key, add these lines to $MURMUR_HOME/config.yaml where it is pulled:")
	fmt.Fprint(e.stdout, trustYAML(scopes, pubFile, string(pubPEM), hint))
}

// pushResult is one argument of mur push: what was published, or why it was not.
type pushResult struct {
	Arg        string        `json:"arg"`
	Name       string        `json:"name"`
	Version    string        `json:"version"`
	Platform   string        `json:"platform"`
	Manifest   digest.Digest `json:"manifest_digest"` // what crane and oras address
	Index      digest.Digest `json:"index_digest"`    // the tag's index, when it holds several platforms
	Digest     digest.Digest `json:"digest"`          // the payload (the manifest's layer)
	Size       int64         `json:"size"`
	Store      string        `json:"store"`
	SignedWith string        `json:"signed_with"`
	BundleFile string        `json:"bundle_file"` // --bundle-out: where the bundle was written
	Error      *jsonError    `json:"error"`
	err        error
}

// pusher publishes the arguments of one mur push, one at a time.
type pusher struct {
	e        *env
	p        *project
	dst      fstore.Store
	pr       *progress
	scope    string
	platform string
	key      []byte
	// bundleOut is --bundle-out: the keyed bundle is written there too, once the push is done.
	bundleOut string
	several   bool // name the argument in each failure, to tell one of several apart
}

func (pu *pusher) push(arg string) pushResult {
	res := pushResult{Arg: arg, Store: pu.dst.String()}
	it, err := pu.item(arg, &res)
	if err != nil {
		if pu.several && !strings.Contains(errs.Message(err), arg) && !strings.Contains(errs.Message(err), it.Desc.Name.String()+"@") {
			err = errs.Wrap(err, errs.TokenOf(err), "%s: %s", arg, errs.Message(err))
		}
		res.err, res.Error = err, toJSONError(err)
	}
	return res
}

func (pu *pusher) item(arg string, res *pushResult) (publish.Item, error) {
	var item publish.Item
	r, err := parseRef("push", arg)
	if err != nil {
		return item, err
	}
	if r.IsFile() {
		if pu.scope == "" {
			return item, usagef("pushing a file needs --scope, e.g. 'mur push %s --scope acme --store %s'", arg, pu.dst)
		}
		item, err = publish.FromFile(r.Path, pu.scope, pu.platform)
	} else {
		if pu.scope != "" {
			return item, usagef("--scope applies to files; %s already has scope %s", r.Name, r.Name.Scope)
		}
		cs, cerr := openCAS(pu.p.home)
		if cerr != nil {
			return item, cerr
		}
		l, lerr := lock.Read(pu.p.LockPath())
		if lerr != nil {
			return item, lerr
		}
		item, err = publish.FromCAS(cs, l, r, pu.platform)
	}
	if err != nil {
		return item, err
	}
	res.Name, res.Version, res.Platform = item.Desc.Name.String(), item.Desc.Version, item.Desc.Platform
	res.Digest, res.Size = item.Desc.Digest, item.Desc.Size
	var signed []byte
	if pu.key != nil {
		if res.SignedWith, err = publish.Sign(pu.e.ctx, pu.e.verifier(), &item, pu.key); err != nil {
			return item, err
		}
		signed = item.Bundles[len(item.Bundles)-1]
	}
	ctx := pu.e.ctx
	if err := publish.Push(ctx, countingStore{Store: pu.dst, name: res.Name, p: pu.pr}, item); err != nil {
		return item, err
	}
	at, err := fstore.AddressOf(ctx, pu.dst, item.Desc)
	if err != nil {
		return item, err
	}
	res.Manifest, res.Index = at.Manifest, at.Index
	if pu.bundleOut != "" {
		if err := writeBundle(pu.bundleOut, signed); err != nil {
			return item, errs.Wrap(err, errs.TokenOf(err), "%s@%s was pushed and signed, but %s", res.Name, res.Version, errs.Message(err))
		}
		res.BundleFile = pu.bundleOut
	}
	return item, nil
}

// writeBundle writes a Sigstore bundle to path, whole or not at all.
func writeBundle(path string, bundle []byte) error {
	abs, err := filepath.Abs(path)
	if err == nil {
		err = atomicfile.WriteFile(abs, bundle, 0o644)
	}
	if err != nil {
		return errs.Wrap(err, errs.IO, "its bundle could not be written to %s: %v; check the folder", path, errs.OSCause(err))
	}
	return nil
}

// countingStore reports a push's upload as it reads the payload.
type countingStore struct {
	fstore.Store
	name string
	p    *progress
}

func (c countingStore) Push(ctx context.Context, desc fstore.Descriptor, payload io.Reader) error {
	start := time.Now()
	c.p.event(fetch.Event{Name: c.name, Phase: phaseUpload, Total: desc.Size})
	cr := &countingReader{r: payload, report: func(n int64) {
		c.p.event(fetch.Event{Name: c.name, Phase: phaseUpload, Bytes: n, Total: desc.Size})
	}}
	if err := c.Store.Push(ctx, desc, cr); err != nil {
		c.p.event(fetch.Event{Name: c.name, Phase: fetch.PhaseFailed})
		return err
	}
	c.p.event(fetch.Event{Name: c.name, Phase: fetch.PhaseDone, Bytes: desc.Size, Total: desc.Size, From: c.String(), Elapsed: time.Since(start), Moved: desc.Size})
	return nil
}

// AttachBundle passes a bundle through to the store, when it can hold one.
func (c countingStore) AttachBundle(ctx context.Context, n ref.Name, version string, d digest.Digest, bundle []byte) error {
	at, ok := c.Store.(fstore.BundleAttacher)
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
