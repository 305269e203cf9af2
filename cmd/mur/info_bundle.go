package main

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// bundleWritten is what mur info --bundle-out wrote.
type bundleWritten struct {
	File     string `json:"file"`
	Artifact string `json:"artifact"` // name@version
	Platform string `json:"platform"`
	Digest   string `json:"digest"` // the blob the bundle is of
	// From is where the bundle came from: "cas" when a pull verified it, else the store or source.
	From     string `json:"from"`
	Verified bool   `json:"verified"`
}

// writePinBundle writes the bundle of info's pin for this machine to file: the one a pull
// verified, which the CAS keeps, else the first a store or the source holds for its digest.
func writePinBundle(e *env, p *project, in fetch.LocalInput, info *fetch.ArtifactInfo, stores storeFlags, file string) (*bundleWritten, error) {
	pin, err := hostPin(info)
	if err != nil {
		return nil, err
	}
	d := digest.Digest(pin.Digest)
	out := &bundleWritten{File: file, Artifact: info.Name + "@" + pin.Version, Platform: pin.Platform, Digest: pin.Digest}
	var bundle []byte
	if pv := info.Provenance; pv != nil {
		if b, err := provenance.ReadBundle(e.ctx, in.CAS, pv.Bundle); err == nil && provenance.Names(b, d) {
			bundle, out.From, out.Verified = b, "cas", true
		}
	}
	if bundle == nil {
		puller, err := p.puller(e, stores, fetch.PullerOptions{CAS: in.CAS, Connections: 1})
		if err != nil {
			return nil, err
		}
		name, _ := ref.ParseName(info.Name)
		where, err := p.InstallFrom(info.Name, nil)
		if err != nil {
			return nil, err
		}
		if bundle, out.From, _, err = puller.PinBundle(e.ctx, name, pin.Version, d, where); err != nil {
			return nil, err
		}
	}
	if err := writeBundle(file, bundle); err != nil {
		return nil, errs.Wrap(err, errs.TokenOf(err), "%s: %s", out.Artifact, errs.Message(err))
	}
	return out, nil
}

// hostPin is the pin of info that this machine runs: its platform's, else the one for any
// platform, else the only one.
func hostPin(info *fetch.ArtifactInfo) (fetch.Listed, error) {
	for _, want := range []string{ref.HostPlatform(), ref.PlatformAny} {
		for _, p := range info.Pins {
			if p.Platform == want {
				return p, nil
			}
		}
	}
	if len(info.Pins) == 1 {
		return info.Pins[0], nil
	}
	if len(info.Pins) == 0 {
		return fetch.Listed{}, errs.New(errs.NotFound, "mur knows no blob of %s, so there is no bundle to write; pull it first", info.Name)
	}
	return fetch.Listed{}, errs.New(errs.NotFound, "%s has %d pins and none for this machine (%s); pull it for this platform first", info.Name, len(info.Pins), ref.HostPlatform())
}

func printBundleWritten(e *env, b *bundleWritten) {
	if b.Verified {
		fmt.Fprintf(e.stdout, "wrote the bundle of %s (%s, %s) to %s: a pull verified it, and the CAS kept it\n", b.Artifact, b.Platform, b.Digest, b.File)
		return
	}
	fmt.Fprintf(e.stdout, "wrote the bundle of %s (%s, %s) to %s, from %s; no pull verified it: check it with 'mur verify FILE.mur.zip --bundle %s --key KEY.pub' or cosign\n", b.Artifact, b.Platform, b.Digest, b.File, b.From, b.File)
}
