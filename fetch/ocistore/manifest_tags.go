package ocistore

import (
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// payloadTags are the tags that name versions: referrer tags (an index of bundles, never a
// payload's manifest) left out.
func payloadTags(all []string) []string {
	var out []string
	for _, t := range all {
		if !referrerTag.MatchString(t) {
			out = append(out, t)
		}
	}
	return out
}

// listedVersions are the versions the tags name, referrer tags left out: what latest chose from.
func listedVersions(all []string) []string {
	var out []string
	for _, t := range payloadTags(all) {
		out = append(out, ref.VersionFromTag(t))
	}
	return out
}

// latestTag picks the tag of the highest semantic version among all, referrer tags left out.
func latestTag(where string, name ref.Name, all []string) (string, error) {
	byVersion := map[string]string{}
	var versions []string
	tags := payloadTags(all)
	for _, t := range tags {
		v := ref.VersionFromTag(t)
		byVersion[v] = t
		versions = append(versions, v)
	}
	best, ok := ref.HighestSemver(versions)
	if !ok {
		if len(tags) == 0 {
			return "", errs.New(errs.NotFound, "%s holds no versions of %s", where, name)
		}
		shown := tags
		if len(shown) > 10 {
			shown = shown[:10]
		}
		return "", errs.New(errs.Usage, "%s holds versions of %s (%s) but none is a semantic version, so latest means nothing; ask for one explicitly, e.g. %s@%s", where, name, strings.Join(shown, ", "), name, ref.VersionFromTag(tags[0]))
	}
	return byVersion[best], nil
}

// sharedTag says why two versions meet under one tag: '+', which tags can't hold, is stored as
// '_'; without a '+' in either, the tag was written by hand, or by another tool.
func sharedTag(a, b string) string {
	if strings.Contains(a, "+") || strings.Contains(b, "+") {
		return "the two share a tag because '+' is stored as '_'"
	}
	return "the tag names another version than its own; it was written by hand or by another tool"
}
