package main

import (
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
)

// The --json views of results the library reports in its own types (docs/ARCHITECTURE.md: one
// JSON shape per result). A result's own json tags are its shape; a view embeds it and states
// only what the library can't: the command's own keys, and each error as {"token", "message"},
// shadowing the result's. Every key is always present (lists [], absent objects null). Where
// the library's tags serve a file on disk (cas.Record) they leave absent keys out, and the view
// lists every key (recordJSON).

// resultJSON is one artifact of pull, add and warm.
type resultJSON struct {
	fetch.Result
	Blob   string      `json:"blob"` // outside a project: where the CAS holds it
	File   string      `json:"file"` // -o: the .mur.zip written
	Mirror *mirrorJSON `json:"mirror"`
	Error  *jsonError  `json:"error"`
}

// mirrorJSON is a result's write-through to the mirror, its failure as {"token", "message"}.
type mirrorJSON struct {
	Store  string     `json:"store"`
	Pushed bool       `json:"pushed"`
	Error  *jsonError `json:"error"`
}

func toResultJSON(r fetch.Result) resultJSON {
	out := resultJSON{Result: r, Error: toJSONError(r.Err)}
	if out.Error == nil && r.Error != "" {
		out.Error = recordError(r.Error)
	}
	if m := r.Mirror; m != nil {
		out.Mirror = &mirrorJSON{Store: m.Store, Pushed: m.Pushed}
		if m.Error != "" {
			out.Mirror.Error = &jsonError{Token: errs.Token(m.Token), Message: m.Error}
		}
	}
	return out
}

func toResultsJSON(rs []fetch.Result) []resultJSON {
	out := make([]resultJSON, len(rs))
	for i, r := range rs {
		out[i] = toResultJSON(r)
	}
	return out
}

// warmJSON is mur warm's report: its counts, then each artifact as pull reports it.
type warmJSON struct {
	Artifacts int             `json:"artifacts"`
	Fetched   int             `json:"fetched"`
	Cached    int             `json:"cached"`
	Compiled  int             `json:"compiled"`
	Bytes     int64           `json:"bytes_fetched"`
	Results   []resultJSON    `json:"results"`
	Problems  []fetch.Problem `json:"problems"`
}

// verifyJSON is mur verify's report.
type verifyJSON struct {
	Blobs      int                        `json:"blobs"`
	Tools      int                        `json:"tools"`
	Compiled   int                        `json:"compiled"`
	Bundles    int                        `json:"bundles"`
	Problems   []fetch.Problem            `json:"problems"`
	Provenance []fetch.VerifiedProvenance `json:"provenance"`
}

// recordJSON is one pull record.
type recordJSON struct {
	Time            string          `json:"time"`
	Ref             string          `json:"ref"`
	Name            string          `json:"name"`
	Version         string          `json:"version"`
	Platform        string          `json:"platform"`
	Digest          digest.Digest   `json:"digest"`
	Size            int64           `json:"size"`
	Source          string          `json:"source"`
	Release         string          `json:"release"`
	Asset           string          `json:"asset"`
	OwnerID         int64           `json:"owner_id"`
	Transferred     int64           `json:"transferred"`
	DurationMS      int64           `json:"duration_ms"`
	Outcome         cas.Outcome     `json:"outcome"`
	Skipped         []cas.Skip      `json:"skipped"`
	Notes           []string        `json:"notes"`
	Provenance      *cas.Provenance `json:"provenance"`
	Private         bool            `json:"private"`
	ResolvedOffline bool            `json:"resolved_offline"`
	VersionList     digest.Digest   `json:"version_list"`
	Error           *jsonError      `json:"error"`
}

func toRecordJSON(r cas.Record) recordJSON {
	return recordJSON{
		Time: r.Time.UTC().Format(timeJSON), Ref: r.Ref, Name: r.Name, Version: r.Version, Platform: r.Platform,
		Digest: r.Digest, Size: r.Size, Source: r.Source, Release: r.Release, Asset: r.Asset, OwnerID: r.OwnerID,
		Transferred: r.Transferred, DurationMS: r.DurationMS, Outcome: r.Outcome, Skipped: r.Skipped, Notes: r.Notes,
		Provenance: r.Provenance, Private: r.Private, ResolvedOffline: r.ResolvedOffline, VersionList: r.VersionList,
		Error: recordError(r.Error),
	}
}

// timeJSON is how a time shows in --json: UTC, to the nanosecond, as Go marshals a time.Time.
const timeJSON = "2006-01-02T15:04:05.999999999Z07:00"
