package manifest

import (
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Find returns the declared artifact that name means: a scoped name, or a bare name when exactly
// one declared artifact has it.
func (c *Capsule) Find(name string) (*Artifact, error) {
	if strings.Contains(name, "/") {
		n, err := ref.ParseName(name)
		if err != nil {
			return nil, err
		}
		for i := range c.Artifacts {
			if c.Artifacts[i].Name == n {
				return &c.Artifacts[i], nil
			}
		}
		return nil, errs.New(errs.NotFound, "%s is not declared in %s (%s); add it under artifacts", n, c.Path, c.declared())
	}
	if err := ref.ValidateSegment(name); err != nil {
		return nil, errs.New(errs.Usage, "artifact %s; give a scoped name such as acme/grep", errs.Message(err))
	}
	var found []*Artifact
	for i := range c.Artifacts {
		if c.Artifacts[i].Name.Name == name {
			found = append(found, &c.Artifacts[i])
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, errs.New(errs.NotFound, "no artifact named %q is declared in %s (%s); add it under artifacts as <scope>/%s", name, c.Path, c.declared(), name)
	}
	names := make([]string, len(found))
	for i, a := range found {
		names[i] = a.Name.String()
	}
	return nil, errs.New(errs.Usage, "%q is ambiguous in %s: it could be %s; use the scoped name", name, c.Path, strings.Join(names, " or "))
}

func (c *Capsule) declared() string {
	if len(c.Artifacts) == 0 {
		return "it declares none"
	}
	names := make([]string, len(c.Artifacts))
	for i, a := range c.Artifacts {
		names[i] = a.Name.String()
	}
	return "declared: " + strings.Join(names, ", ")
}

// StoreName is the state store's name: capabilities.state.store, or else the capsule's name.
func (c *Capsule) StoreName() string {
	if s := c.Capabilities.State; s != nil && s.Store != "" {
		return s.Store
	}
	return c.Name
}

// Effective is what the artifact is granted: the capsule's capabilities narrowed by the
// artifact's own entry, by the rules in the package documentation. A nil artifact gets the
// capsule's. The result's State, when granted, names its store.
func (c *Capsule) Effective(a *Artifact) Capabilities {
	ceil := c.Capabilities
	out := Capabilities{
		Filesystem: Filesystem{Scope: ceil.Filesystem.Scope, ReadOnly: clone(ceil.Filesystem.ReadOnly)},
		Env:        Env{Allow: clone(ceil.Env.Allow)},
		Limits:     ceil.Limits,
		Install:    Install{From: clone(ceil.Install.From)},
	}
	if out.Filesystem.Scope == "" {
		out.Filesystem.Scope = "."
	}
	if ceil.State != nil {
		out.State = &State{Store: c.StoreName()}
	}
	if a == nil || a.Capabilities == nil {
		return out
	}
	n := a.Capabilities
	if n.Filesystem.Scope != "" {
		out.Filesystem.Scope = n.Filesystem.Scope
	}
	for _, ro := range n.Filesystem.ReadOnly {
		if !contains(out.Filesystem.ReadOnly, ro) {
			out.Filesystem.ReadOnly = append(out.Filesystem.ReadOnly, ro)
		}
	}
	if n.dropState {
		out.State = nil
	}
	if n.Env.Allow != nil {
		out.Env.Allow = intersect(out.Env.Allow, n.Env.Allow)
	}
	out.Limits.MemoryMiB = minSet(out.Limits.MemoryMiB, n.Limits.MemoryMiB)
	out.Limits.TimeoutS = minSet(out.Limits.TimeoutS, n.Limits.TimeoutS)
	out.Limits.StateMiB = minSet(out.Limits.StateMiB, n.Limits.StateMiB)
	if n.Install.From != nil {
		out.Install.From = intersect(out.Install.From, n.Install.From)
	}
	return out
}

// NarrowFrom applies `--from` to install.from, in the flag's order. The flag can only narrow:
// a word install.from does not grant is refused (not-granted), never added. No flag leaves from
// as it is.
func NarrowFrom(from []string, flag []string) ([]string, error) {
	if len(flag) == 0 {
		return clone(from), nil
	}
	out := []string{}
	for _, f := range flag {
		if err := CheckFrom(f); err != nil {
			return nil, errs.Wrap(err, errs.Usage, "--from %s", errs.Message(err))
		}
		if !contains(from, f) {
			return nil, errs.New(errs.NotGranted, "--from %s is not granted: install.from in murmur.yaml allows only [%s]; add %s there to allow it", f, strings.Join(from, ", "), f)
		}
		if !contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// intersect keeps the items of ceiling that narrow also holds, in ceiling's order. The result
// is never nil, so "nothing allowed" stays distinct from "not narrowed".
func intersect(ceiling, narrow []string) []string {
	out := []string{}
	for _, s := range ceiling {
		if contains(narrow, s) && !contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func minSet(a, b int) int {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

func clone(ss []string) []string {
	if ss == nil {
		return nil
	}
	return append([]string{}, ss...)
}
