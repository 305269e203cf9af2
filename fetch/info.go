package fetch

import (
	"context"
	"sort"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// ArtifactInfo is what mur knows of one artifact, from local files alone (`mur info`).
type ArtifactInfo struct {
	Name      string `json:"name"`
	Requested string `json:"requested"` // murmur.yaml's version; "" when it does not declare it
	Locked    string `json:"locked"`    // the version murmur.lock pins; "" when it pins none
	Source    string `json:"source"`    // the scope's owner pin in murmur.lock (github:OWNER/REPO), or ""
	// Pins are murmur.lock's, one per platform; for a version the lock does not pin (or outside
	// a project), the blobs pulls recorded for it.
	Pins []Listed `json:"pins"`
	// Provenance is what the newest verified bundle of a pinned blob proved, or nil.
	Provenance *cas.Provenance `json:"provenance"`
	// Records are the pulls of the name (of the version, when one was asked), oldest first.
	Records []cas.Record `json:"records"`
}

// Info gathers what mur knows of r (a name, or name@version). Knowing nothing of it is
// errs.NotFound.
func Info(ctx context.Context, in LocalInput, r ref.Ref) (*ArtifactInfo, error) {
	name := r.Name.String()
	version := r.Version
	if version == ref.Latest {
		version = ""
	}
	info := &ArtifactInfo{Name: name, Pins: []Listed{}, Records: []cas.Record{}}
	if in.Intent != nil && in.Intent.Capsule != nil {
		for _, a := range in.Intent.Capsule.Artifacts {
			if a.Name == r.Name {
				info.Requested = a.Version
			}
		}
	}
	var entry *lock.Entry
	if in.Lock != nil {
		entry = in.Lock.Find(name)
		if pin, ok := in.Lock.Scopes[r.Name.Scope]; ok {
			info.Source = pin.Source
		}
	}
	host := ref.HostPlatform()
	if entry != nil {
		info.Locked = entry.ResolvedVersion
	}
	if entry != nil && (version == "" || version == entry.ResolvedVersion) {
		_, hostPin, _ := entry.Digest(host)
		add := func(plat, hex string) {
			it := Listed{Name: name, Requested: info.Requested, Version: entry.ResolvedVersion, Platform: plat, Digest: "sha256:" + hex, Size: -1}
			in.fill(ctx, &it, r.Name, plat == hostPin && in.Intent != nil)
			info.Pins = append(info.Pins, it)
		}
		if entry.SHA256.Any != "" {
			add(ref.PlatformAny, entry.SHA256.Any)
		}
		plats := make([]string, 0, len(entry.SHA256.Platforms))
		for p := range entry.SHA256.Platforms {
			plats = append(plats, p)
		}
		sort.Strings(plats)
		for _, p := range plats {
			add(p, entry.SHA256.Platforms[p])
		}
	}
	recs, err := in.CAS.Records("")
	if err != nil {
		return nil, err
	}
	pinned := map[string]bool{}
	for _, p := range info.Pins {
		pinned[p.Digest] = true
	}
	seen := map[string]bool{}
	for _, rec := range recs {
		if rec.Name != name || (version != "" && rec.Version != version) {
			continue
		}
		info.Records = append(info.Records, rec)
		if rec.Provenance != nil && (pinned[rec.Digest.String()] || len(info.Pins) == 0 || entry == nil) {
			info.Provenance = rec.Provenance
		}
	}
	if entry == nil || (version != "" && version != entry.ResolvedVersion) {
		for i := len(info.Records) - 1; i >= 0; i-- {
			rec := info.Records[i]
			k := rec.Version + " " + rec.Platform + " " + rec.Digest.String()
			if rec.Digest == "" || seen[k] || (rec.Outcome != cas.OutcomePulled && rec.Outcome != cas.OutcomeCacheHit) {
				continue
			}
			seen[k] = true
			it := Listed{Name: name, Requested: info.Requested, Version: rec.Version, Platform: rec.Platform, Digest: rec.Digest.String(), Size: -1}
			in.fill(ctx, &it, r.Name, false)
			info.Pins = append(info.Pins, it)
		}
	}
	if info.Provenance == nil && entry != nil && entry.Provenance != nil && len(info.Pins) > 0 && info.Pins[0].Version == entry.ResolvedVersion {
		info.Provenance = &cas.Provenance{Kind: entry.Provenance.Kind, Bundle: digest.Digest(entry.Provenance.Bundle), Signer: entry.Provenance.Signer}
	}
	asked := name
	if version != "" {
		asked += "@" + version
	}
	if info.Requested == "" && entry == nil && len(info.Records) == 0 {
		return nil, errs.New(errs.NotFound, "mur knows nothing of %s: no murmur.yaml here declares it, no murmur.lock pins it and no pull recorded it; 'mur pull %s' brings it in", asked, asked)
	}
	if len(info.Pins) == 0 && version != "" && entry != nil && len(info.Records) == 0 {
		return nil, errs.New(errs.NotFound, "mur knows nothing of %s@%s: murmur.lock pins %s@%s and no pull recorded %s; 'mur info %s' shows the pinned one", name, version, name, entry.ResolvedVersion, version, name)
	}
	return info, nil
}
