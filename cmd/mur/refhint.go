package main

import (
	"strings"

	"github.com/murmur-nexus/mur/internal/ref"
)

// Other tools write references mur does not take: a digest pin (crane, oras, docker) or a
// registry's full reference. refHint turns one into the form mur expects, built from what was
// typed, so that the user gets a "did you mean" rather than a lesson in syntax.

// digestPin splits scope/name@sha256:… into the name and the digest.
func digestPin(arg string) (name, dgst string, ok bool) {
	name, dgst, ok = strings.Cut(arg, "@")
	if !ok || !strings.Contains(dgst, ":") {
		return "", "", false
	}
	algo, _, _ := strings.Cut(dgst, ":")
	if algo != "sha256" && algo != "sha512" && algo != "sha384" {
		return "", "", false
	}
	if _, err := ref.ParseName(name); err != nil {
		return "", "", false
	}
	return name, dgst, true
}

// registryRef is a registry's full reference, [oci://]HOST[:PORT]/[PREFIX/]SCOPE/NAME[:TAG|@VERSION].
type registryRef struct {
	host, prefix, name, version string
}

func parseRegistryRef(arg string) (registryRef, bool) {
	rest := strings.TrimPrefix(arg, "oci://")
	host, path, ok := strings.Cut(rest, "/")
	// A host is what docker takes for one: it has a dot or a port, or is localhost.
	if !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") || strings.HasSuffix(arg, ".mur.zip") {
		return registryRef{}, false
	}
	version := ""
	if p, v, ok := strings.Cut(path, "@"); ok {
		path, version = p, v
	} else if i := strings.LastIndexByte(path, ':'); i > strings.LastIndexByte(path, '/') {
		path, version = path[:i], path[i+1:]
	}
	segs := strings.Split(path, "/")
	if len(segs) < 2 {
		return registryRef{}, false
	}
	name := segs[len(segs)-2] + "/" + segs[len(segs)-1]
	if _, err := ref.ParseName(name); err != nil {
		return registryRef{}, false
	}
	return registryRef{host: host, prefix: strings.Join(segs[:len(segs)-2], "/"), name: name, version: version}, true
}

// ref is the reference mur takes: scope/name@version, or scope/name for the newest.
func (r registryRef) ref() string {
	if r.version == "" || strings.EqualFold(r.version, "latest") {
		return r.name
	}
	if _, _, ok := digestPin(r.name + "@" + r.version); ok {
		return r.name + "@VERSION"
	}
	return r.name + "@" + r.version
}

// store is the mur store address of the registry, when the reference shows its prefix.
func (r registryRef) store() (string, bool) {
	if r.prefix == "" {
		return "", false
	}
	return "oci://" + r.host + "/" + r.prefix, true
}

// refHint is the "did you mean" for arg given to `mur VERB`, or "" when arg is not written in
// another tool's form.
func refHint(verb, arg string) string {
	if name, d, ok := digestPin(arg); ok {
		return "\"" + arg + "\" pins a digest; mur takes scope/name@version and pins the digest itself, in murmur.lock: did you mean 'mur " + verb + " " + name + "@VERSION'? ('mur cache records --digest " + d + "' shows which version was pulled as that digest)"
	}
	r, ok := parseRegistryRef(arg)
	if !ok {
		return ""
	}
	if st, ok := r.store(); ok {
		if verb == "push" { // the registry is where to push: --store is the destination
			return "\"" + arg + "\" is a registry's full reference; mur push takes scope/name@version (or a .mur.zip) and the registry as --store: did you mean 'mur push " + r.ref() + " --store " + st + "'?"
		}
		if c := find(commands(), verb); c == nil || !readsStores(commandFlags(c)) {
			// A command without --store (mur info, whose --store serves --bundle-out only)
			// asks the stores config.yaml names.
			return "\"" + arg + "\" is a registry's full reference; mur takes scope/name@version and the registry as a store: did you mean 'mur " + verb + " " + r.ref() + "', with " + st + " added to stores: in .murmur/config.yaml?"
		}
		return "\"" + arg + "\" is a registry's full reference; mur takes scope/name@version and the registry as a store: did you mean 'mur " + verb + " --store " + st + " " + r.ref() + "'? (or add " + st + " to stores: in .murmur/config.yaml)"
	}
	return "\"" + arg + "\" is a registry's full reference; mur takes scope/name@version, and the registry as a store oci://" + r.host + "/PREFIX that holds PREFIX/" + r.name + ": did you mean 'mur " + verb + " " + r.ref() + "' with such a store? mur can't address repositories at a registry's root"
}
