package pull

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// keyedBundle is a keyed bundle of d whose key hint is signer: enough for provenance.Names and
// for fakeVerifier, which is what says whether it verifies.
func keyedBundle(d digest.Digest, signer string) []byte {
	var b struct {
		Message struct {
			Digest struct {
				Algorithm string `json:"algorithm"`
				Digest    []byte `json:"digest"`
			} `json:"messageDigest"`
		} `json:"messageSignature"`
		PublicKey string `json:"publicKey"`
	}
	b.Message.Digest.Algorithm = "SHA2_256"
	b.Message.Digest.Digest, _ = hex.DecodeString(d.Encoded())
	b.PublicKey = signer
	out, _ := json.Marshal(b)
	return out
}

// fakeVerifier says of a bundle what outcomes says of its signer: ok, unanchored or mismatch.
type fakeVerifier struct {
	outcomes map[string]string
	mu       sync.Mutex
	asked    []string // the signers asked about, in order
}

func (v *fakeVerifier) Verify(_ context.Context, bundle []byte, _ digest.Digest, _ provenance.Expect, _ provenance.Trust) (provenance.Facts, error) {
	var b struct {
		PublicKey string `json:"publicKey"`
	}
	_ = json.Unmarshal(bundle, &b)
	v.mu.Lock()
	v.asked = append(v.asked, b.PublicKey)
	v.mu.Unlock()
	switch v.outcomes[b.PublicKey] {
	case "ok":
		return provenance.Facts{Kind: lock.ProvenanceKey, Signer: b.PublicKey}, nil
	case "unanchored":
		return provenance.Facts{}, &provenance.Unanchored{Signer: b.PublicKey}
	}
	return provenance.Facts{}, errs.New(errs.ProvenanceMismatch, "bundle of %s names other bytes", b.PublicKey)
}

func attestorWith(t *testing.T, mode string, v provenance.Verifier) *attestor {
	c, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prov := Provenance{Policy: func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: mode} }}
	if v != nil {
		prov.Verifier = v
	}
	return &attestor{cas: c, prov: prov, pins: true}
}

// The policy, what murmur.lock recorded and what the verifier says of the bundles found decide
// together whether a pull goes on, warned or not, and with which bundle verified.
func TestAttestorPolicyRecordedVerifier(t *testing.T) {
	d := sha("payload")
	recorded := &lock.Provenance{Kind: lock.ProvenanceKey, Bundle: sha("recorded bundle").String(), Signer: "release key"}
	const none = ""
	cases := []struct {
		mode     string
		recorded bool
		outcome  string // of the one bundle the place holds; none when it holds none
		noVerify bool   // this mur has no verifier
		wantTok  errs.Token
		wantErr  bool   // an error without a token of its own
		wantWarn string // a warning that contains this
		verified bool
	}{
		{mode: config.ProvenanceOff, outcome: "mismatch"},
		{mode: config.ProvenanceOff, recorded: true, wantTok: errs.ProvenanceMissing},
		{mode: config.ProvenancePrefer, outcome: none, wantWarn: string(errs.NoProvenance)},
		{mode: config.ProvenanceRequire, outcome: none, wantTok: errs.ProvenanceMissing},
		{mode: config.ProvenancePrefer, recorded: true, outcome: none, wantTok: errs.ProvenanceMissing},
		{mode: config.ProvenancePrefer, outcome: "ok", verified: true},
		{mode: config.ProvenanceRequire, recorded: true, outcome: "ok", verified: true},
		{mode: config.ProvenancePrefer, outcome: "unanchored", wantWarn: "signed by signer"},
		{mode: config.ProvenanceRequire, outcome: "unanchored", wantErr: true},
		{mode: config.ProvenancePrefer, recorded: true, outcome: "unanchored", wantErr: true},
		{mode: config.ProvenancePrefer, outcome: "mismatch", wantTok: errs.ProvenanceMismatch},
		{mode: config.ProvenanceRequire, outcome: "mismatch", wantTok: errs.ProvenanceMismatch},
		{mode: config.ProvenancePrefer, outcome: "ok", noVerify: true},
		{mode: config.ProvenancePrefer, recorded: true, outcome: "ok", noVerify: true, wantTok: errs.ProvenanceUnverifiable},
	}
	for _, c := range cases {
		name := c.mode + "/recorded=" + map[bool]string{true: "yes", false: "no"}[c.recorded] + "/" + c.outcome
		if c.noVerify {
			name += "/no-verifier"
		}
		t.Run(name, func(t *testing.T) {
			v := &fakeVerifier{outcomes: map[string]string{"signer": c.outcome}}
			a := attestorWith(t, c.mode, v)
			if c.noVerify {
				a.prov.Verifier = nil
			}
			got := &fetched{desc: fstore.Descriptor{Name: grep, Version: "1.0.0", Digest: d, Origin: "oci://a"}, bundles: heldBundles(nil)}
			if c.outcome != none {
				got.bundles = heldBundles{keyedBundle(d, "signer")}
			}
			pin := pinned{}
			if c.recorded {
				pin.provenance, pin.provenanceOf = recorded, "1.0.0"
			}
			var res Result
			err := a.check(context.Background(), Request{Name: grep, Version: "1.0.0"}, pin, got, &res)
			switch {
			case c.wantTok != "":
				if errs.TokenOf(err) != c.wantTok {
					t.Fatalf("err = %v, want a %s", err, c.wantTok)
				}
			case c.wantErr:
				if err == nil {
					t.Fatal("it passed, want it refused")
				}
			case err != nil:
				t.Fatal(err)
			}
			if warned := strings.Join(res.Warnings, "\n"); c.wantWarn != "" && !strings.Contains(warned, c.wantWarn) || c.wantWarn == "" && warned != "" {
				t.Errorf("warnings %q, want one with %q", warned, c.wantWarn)
			}
			if (got.verified != nil) != c.verified {
				t.Errorf("verified = %v, want %v", got.verified != nil, c.verified)
			}
			if c.mode == config.ProvenanceOff && len(v.asked) > 0 {
				t.Errorf("provenance off asked the verifier about %v", v.asked)
			}
		})
	}
}

// Candidates are tried in order: the bundle murmur.lock recorded, those that name the payload's
// bytes, then the rest, which are evidence against them rather than bundles to pass over.
func TestAttestorCandidateOrder(t *testing.T) {
	ctx := context.Background()
	d := sha("payload")
	other, naming, recordedB := keyedBundle(sha("other bytes"), "other"), keyedBundle(d, "naming"), keyedBundle(d, "recorded")
	all := map[string]string{"other": "mismatch", "naming": "unanchored", "recorded": "unanchored"}
	try := func(a *attestor, pin pinned, found ...[]byte) []string {
		t.Helper()
		v := a.prov.Verifier.(*fakeVerifier)
		v.asked = nil
		got := &fetched{desc: fstore.Descriptor{Name: grep, Version: "1.0.0", Digest: d, Origin: "oci://a"}, bundles: heldBundles(found)}
		var res Result
		_ = a.check(ctx, Request{Name: grep, Version: "1.0.0"}, pin, got, &res)
		return v.asked
	}
	a := attestorWith(t, config.ProvenanceRequire, &fakeVerifier{outcomes: all})
	if got := try(a, pinned{}, other, naming); !reflect.DeepEqual(got, []string{"naming", "other"}) {
		t.Errorf("asked %v, want the bundle naming the bytes first", got)
	}
	rec := &lock.Provenance{Kind: lock.ProvenanceKey, Bundle: digest.FromBytes(recordedB).String(), Signer: "recorded"}
	pin := pinned{provenance: rec, provenanceOf: "1.0.0"}
	if got := try(a, pin, naming, other, recordedB); !reflect.DeepEqual(got, []string{"recorded", "naming", "other"}) {
		t.Errorf("asked %v, want the recorded bundle the place holds first", got)
	}
	if _, err := a.cas.Ingest(ctx, strings.NewReader(string(recordedB)), int64(len(recordedB)), digest.FromBytes(recordedB)); err != nil {
		t.Fatal(err)
	}
	if got := try(a, pin, naming); !reflect.DeepEqual(got, []string{"recorded", "naming"}) {
		t.Errorf("asked %v, want the recorded bundle the CAS holds first", got)
	}
}
