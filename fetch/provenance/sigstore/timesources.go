package sigstore

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/murmur-nexus/mur/internal/errs"
)

// checkTimeSources verifies every transparency-log entry and every signed (RFC 3161) timestamp
// that b carries against material, whatever the policy asks of them. A keyed bundle needs
// neither, and sigstore-go's keyed policy looks at neither; but a bundle that carries a proof
// vouches with it, so a corrupted one is refused rather than passed over. roots names material
// in messages. An entry or timestamp of a log or authority that material does not hold can't be
// checked (provenance-unverifiable); one of a log or authority it holds that does not verify was
// changed after it was made (provenance-mismatch).
func checkTimeSources(b *bundle.Bundle, material root.TrustedMaterial, want Expect, roots string) error {
	entries, err := b.TlogEntries()
	if err != nil {
		return errs.Wrap(err, errs.ProvenanceMismatch, "the transparency-log entries of the provenance of %s do not parse: %s", want.Artifact, sigstoreMessage(err))
	}
	logs := material.RekorLogs()
	for _, e := range entries {
		if err := checkTlogEntry(b, e, material, logs, want, roots); err != nil {
			return err
		}
	}
	stamps, err := b.Timestamps()
	if err != nil || len(stamps) == 0 {
		return nil // Timestamps fails only for a bundle that carries none
	}
	sc, err := b.SignatureContent()
	if err != nil {
		return errs.Wrap(err, errs.ProvenanceMismatch, "the provenance of %s has no signature: %s", want.Artifact, sigstoreMessage(err))
	}
	for _, ts := range stamps {
		if err := checkTimestamp(ts, sc.Signature(), material.TimestampingAuthorities(), want, roots); err != nil {
			return err
		}
	}
	return nil
}

func checkTlogEntry(b *bundle.Bundle, e *tlog.Entry, material root.TrustedMaterial, logs map[string]*root.TransparencyLog, want Expect, roots string) error {
	id := hex.EncodeToString([]byte(e.LogKeyID()))
	if _, ok := logs[id]; !ok {
		return errs.New(errs.ProvenanceUnverifiable, "the provenance of %s carries an entry of transparency log %s, which %s does not hold, so it can't be checked; if you trust that log, set trusted_root in $MURMUR_HOME/config.yaml to a trusted root that holds it",
			want.Artifact, clean(id), roots)
	}
	if e.HasInclusionPromise() {
		// sigstore-go passes over an entry whose SET does not verify, as if it came from a log it
		// does not know: of a log it knows, that SET was changed.
		if err := tlog.VerifySET(e, logs); err != nil {
			token := errs.ProvenanceMismatch
			if !strings.Contains(err.Error(), "unable to verify SET") {
				token = errs.ProvenanceUnverifiable // the log's key is not valid at the entry's time
			}
			return errs.Wrap(err, token, "the signed entry timestamp (SET) of the transparency-log entry of %s does not verify against log %s of %s: %s; the bundle was changed after it was logged, or the log's key does not cover it",
				want.Artifact, clean(id), roots, sigstoreMessage(err))
		}
	}
	if _, err := verify.VerifyTlogEntry(oneEntry{b, e}, material, 1, false); err != nil {
		why := sigstoreMessage(err)
		if strings.Contains(why, "does not match expected root") {
			why = "its inclusion proof does not lead to the root that the log's checkpoint signs" // not the two roots, byte by byte
		}
		return errs.Wrap(err, errs.ProvenanceMismatch, "the transparency-log entry of %s does not verify: %s; the bundle was changed after it was logged",
			want.Artifact, why)
	}
	return nil
}

// oneEntry is a bundle seen with one of its transparency-log entries, so that each is verified on
// its own and none can stand in for another.
type oneEntry struct {
	*bundle.Bundle
	entry *tlog.Entry
}

func (o oneEntry) TlogEntries() ([]*tlog.Entry, error) { return []*tlog.Entry{o.entry}, nil }

// checkTimestamp verifies one signed timestamp of sig against the authorities tsas.
func checkTimestamp(ts, sig []byte, tsas []root.TimestampingAuthority, want Expect, roots string) error {
	var first error
	for _, tsa := range tsas {
		_, err := tsa.Verify(ts, sig)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if claimed(ts, tsas) {
		return errs.Wrap(first, errs.ProvenanceMismatch, "a signed timestamp of the provenance of %s does not verify: %s; it was changed, or it stamps another signature",
			want.Artifact, sigstoreMessage(first))
	}
	return errs.New(errs.ProvenanceUnverifiable, "a signed timestamp of the provenance of %s is by a timestamp authority that %s does not hold, so it can't be checked; if you trust that authority, set trusted_root in $MURMUR_HOME/config.yaml to a trusted root that holds it",
		want.Artifact, roots)
}

// claimed reports whether the timestamp ts names one of tsas as its signer, whether or not it
// verifies: it holds the digest of the authority's signing certificate (the ESSCertIDv2 that an
// RFC 3161 authority signs into every timestamp), or the certificate itself; or, for an
// authority known by its CAs alone, one of their names. A timestamp that names a trusted
// authority and does not verify was changed; one that names none is another authority's.
func claimed(ts []byte, tsas []root.TimestampingAuthority) bool {
	for _, a := range tsas {
		s, ok := a.(*root.SigstoreTimestampingAuthority)
		if !ok {
			continue
		}
		if s.Leaf != nil {
			h256, h384, h512 := sha256.Sum256(s.Leaf.Raw), sha512.Sum384(s.Leaf.Raw), sha512.Sum512(s.Leaf.Raw)
			for _, h := range [][]byte{h256[:], h384[:], h512[:], s.Leaf.Raw} {
				if bytes.Contains(ts, h) {
					return true
				}
			}
			continue
		}
		for _, c := range append([]*x509.Certificate{s.Root}, s.Intermediates...) {
			if c != nil && bytes.Contains(ts, c.RawSubject) {
				return true
			}
		}
	}
	return false
}

// sigstoreMessage is a sigstore-go error as mur quotes it: escaped, and without the
// "; error: %!w(<nil>)" that sigstore-go appends when it joins no errors.
func sigstoreMessage(err error) string {
	msg := strings.ReplaceAll(err.Error(), "; error: %!w(<nil>)", "")
	return clean(strings.ReplaceAll(msg, "%!w(<nil>)", ""))
}
