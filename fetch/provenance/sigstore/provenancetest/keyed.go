package provenancetest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"
)

// Edit decodes a bundle, lets edit change it, and encodes it again: for tests that attach or
// corrupt what a bundle carries.
func Edit(t testing.TB, bundleJSON []byte, edit func(*protobundle.Bundle)) []byte {
	t.Helper()
	pb := &protobundle.Bundle{}
	if err := protojson.Unmarshal(bundleJSON, pb); err != nil {
		t.Fatal(err)
	}
	edit(pb)
	out, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// LogKeyed adds to a keyed bundle (a message signature by a public key, as mur push --sign-key and
// cosign sign-blob --key make) an entry of the CA's Rekor log, with its signed entry timestamp and
// an inclusion proof, as cosign's upload to Rekor does. pubPEM is the signing key's public half.
// The CA's Material holds the log only for a public-good CA (NewCA with another org than
// "GitHub, Inc.").
func (c *CA) LogKeyed(t testing.TB, bundleJSON []byte, pubPEM string) []byte {
	t.Helper()
	return Edit(t, bundleJSON, func(pb *protobundle.Bundle) {
		ms := pb.GetMessageSignature()
		if ms == nil {
			t.Fatal("LogKeyed: the bundle carries no message signature")
		}
		body, err := json.Marshal(map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
			"data": map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(ms.GetMessageDigest().GetDigest())}},
			"signature": map[string]any{
				"content":   base64.StdEncoding.EncodeToString(ms.GetSignature()),
				"publicKey": map[string]any{"content": base64.StdEncoding.EncodeToString([]byte(pubPEM))},
			},
		}})
		if err != nil {
			t.Fatal(err)
		}
		logID, err := c.vs.RekorLogID()
		if err != nil {
			t.Fatal(err)
		}
		rawID, _ := hex.DecodeString(logID)
		now := time.Now().Unix()
		set, err := c.vs.RekorSignPayload(tlog.RekorPayload{LogID: logID, IntegratedTime: now, LogIndex: 0, Body: base64.StdEncoding.EncodeToString(body)})
		if err != nil {
			t.Fatal(err)
		}
		proof, err := c.vs.GetInclusionProof(body)
		if err != nil {
			t.Fatal(err)
		}
		entry, err := tlog.NewEntry(body, now, 0, rawID, set, proof)
		if err != nil {
			t.Fatal(err)
		}
		tle := entry.TransparencyLogEntry()
		tle.KindVersion = &protorekor.KindVersion{Kind: "hashedrekord", Version: "0.0.1"}
		tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
		pb.VerificationMaterial.TlogEntries = append(pb.VerificationMaterial.TlogEntries, tle)
	})
}

// Signature is the signature a bundle carries: its message signature's, or its DSSE envelope's
// first. A timestamp stamps it.
func Signature(pb *protobundle.Bundle) []byte {
	if ms := pb.GetMessageSignature(); ms != nil {
		return ms.GetSignature()
	}
	if sigs := pb.GetDsseEnvelope().GetSignatures(); len(sigs) > 0 {
		return sigs[0].GetSig()
	}
	return nil
}

// Stamp adds to a bundle an RFC 3161 timestamp of its signature by the CA's timestamp authority,
// which the CA's Material holds.
func (c *CA) Stamp(t testing.TB, bundleJSON []byte) []byte {
	t.Helper()
	return Edit(t, bundleJSON, func(pb *protobundle.Bundle) {
		tsr, err := c.vs.TimestampResponse(Signature(pb))
		if err != nil {
			t.Fatal(err)
		}
		vm := pb.VerificationMaterial
		if vm.TimestampVerificationData == nil {
			vm.TimestampVerificationData = &protobundle.TimestampVerificationData{}
		}
		vm.TimestampVerificationData.Rfc3161Timestamps = append(vm.TimestampVerificationData.Rfc3161Timestamps, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: tsr})
	})
}
