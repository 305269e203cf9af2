package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/internal/ref"
)

// plural is "1 blob", "2 blobs"; many is the plural form when it is not one+"s".
func plural(n int, one string, many ...string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	if len(many) > 0 {
		return fmt.Sprintf("%d %s", n, many[0])
	}
	return fmt.Sprintf("%d %ss", n, one)
}

// checkPlatform is the one check of every command's --platform: empty (this machine's), any,
// a known platform tag, and "all" where the command can act on every platform the lock names.
// It rewrites the OCI spelling (linux/arm64) to mur's tag in place.
func checkPlatform(platform *string, allowAll bool) error {
	*platform = ref.NormalizePlatform(*platform)
	value := *platform
	if value == "" || (allowAll && value == "all") {
		return nil
	}
	if ref.ValidatePlatform(value) == nil {
		return nil
	}
	choices := "any, " + strings.Join(ref.KnownPlatforms, ", ")
	if allowAll {
		choices += ", or all"
	}
	return usagef("--platform %q is not a platform; give one of %s (this machine is %s)", value, choices, ref.HostPlatform())
}

// checkArtifactArg refuses a reference where mur run wants an artifact's name, and a
// docker-style name:tag anywhere, with the form that was probably meant.
func checkArtifactArg(arg string) error {
	if name, _, ok := digestPin(arg); ok {
		return usagef("mur run takes the artifact's name, and runs the digest murmur.lock pins; %q names a digest: did you mean 'mur run %s'? ('mur run --explain-scope %s' shows the pinned digest)", arg, name, name)
	}
	if r, ok := parseRegistryRef(arg); ok {
		return usagef("%q is a registry's full reference; mur run takes the artifact's name and runs the version murmur.lock pins: did you mean 'mur run %s'?", arg, r.name)
	}
	if name, version, ok := strings.Cut(arg, "@"); ok {
		return usagef("mur run takes the artifact's name, and runs the version murmur.lock pins; %q names a version: did you mean 'mur run %s'? (to move the pin, run 'mur pull --update %s@%s' first)", arg, name, name, version)
	}
	if name, tag, ok := dockerStyle(arg); ok {
		return usagef("%q is a docker-style reference; mur run takes the artifact's name: did you mean 'mur run %s'? (the version is the one murmur.lock pins, %s asked for)", arg, name, tag)
	}
	return nil
}

// dockerStyle splits scope/name:tag, the way docker, crane and oras write a reference.
func dockerStyle(arg string) (name, tag string, ok bool) {
	i := strings.LastIndexByte(arg, ':')
	if i < 0 || strings.Contains(arg, "@") || strings.HasSuffix(arg, ".mur.zip") {
		return "", "", false
	}
	name, tag = arg[:i], arg[i+1:]
	if _, err := ref.ParseName(name); err != nil || tag == "" {
		return "", "", false
	}
	return name, tag, true
}

// parseRef is ref.ParseRef for `mur VERB`, with a "did you mean" for references written as other
// tools write them: docker-style name:tag, a digest pin, a registry's full reference.
func parseRef(verb, arg string) (ref.Ref, error) {
	r, err := ref.ParseRef(arg)
	if err != nil {
		if hint := refHint(verb, arg); hint != "" {
			return ref.Ref{}, usagef("%s", hint)
		}
		if name, tag, ok := dockerStyle(arg); ok {
			return ref.Ref{}, usagef("reference %q uses docker's name:tag form; mur writes scope/name@version: did you mean %s@%s?", arg, name, tag)
		}
	}
	return r, err
}

// parseSince reads --since: a duration back from now (Go's 90m or 24h, or whole days as 7d), or
// a date (2026-11-30, midnight UTC) or an RFC 3339 time. "" is the zero time: no bound.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, ok := wholeDays(v); ok {
		return now.AddDate(0, 0, -n), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("--since %q is neither a duration (90m, 24h, 7d) nor a date (2026-11-30, or 2026-11-30T08:00:00Z); give one of those", v)
}

// durationFlag is a duration flag that also takes whole days (30d), as --since does: a cache is
// kept for days, and Go's durations stop at hours.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Type() string { return "duration" }

func (f durationFlag) Set(v string) error {
	if n, ok := wholeDays(v); ok {
		*f.d = time.Duration(n) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration: give one such as 90m, 24h or 30d", v)
	}
	*f.d = d
	return nil
}

// wholeDays reads a count of whole days written as 7d.
func wholeDays(v string) (int, bool) {
	days, ok := strings.CutSuffix(v, "d")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(days)
	return n, err == nil && n >= 0
}
