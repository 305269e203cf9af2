package main

import (
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/manifest"
)

// completeCommand is the hidden command the shell scripts of `mur completion` call on every TAB:
// `mur __complete WORD... CURRENT` prints the candidates for CURRENT, one a line. Reading the
// words as mur's own flag parser does is what keeps a flag's value (--home DIR) from being taken
// for the command name, and it lets a completion know the project: `mur run <TAB>` offers the
// artifacts murmur.yaml declares.
const completeCommand = "__complete"

// artifactArgs are the commands whose arguments are artifact references or declared names.
var artifactArgs = []string{"add", "info", "lock", "pull", "rm", "run"}

// flagValues are the values a flag of flags takes from a fixed set: those its registration lists
// (valuesAnnotation, as --platform's group does), else by the flag's name.
func flagValues(flags *pflag.FlagSet, flag string) []string {
	if f := flags.Lookup(flag); f != nil {
		if vals, ok := f.Annotations[valuesAnnotation]; ok {
			return vals
		}
	}
	switch flag {
	case "provenance":
		return []string{config.ProvenanceOff, config.ProvenancePrefer, config.ProvenanceRequire}
	case "from":
		return []string{manifest.FromSources, manifest.FromStores}
	case "store", "mirror":
		return []string{store.SchemeOCI, store.SchemeOCILayout}
	case "compression":
		return []string{string(artifact.Deflate), string(artifact.Zstd)}
	}
	return nil
}

// complete writes the candidates for the last of words (the words after "mur"; the last one is
// the word being completed, "" at a fresh TAB), found from dir.
func complete(w io.Writer, words []string, dir string) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	var cmd, sub *command
	cmds := commands()
	positional := 0
	valueOf := "" // the flag whose value the next word is
	flags := commandFlags(nil)
	for i := 0; i < len(before); i++ {
		word := before[i]
		switch {
		case valueOf != "":
			valueOf = ""
			if word == "=" { // bash splits --flag=value at '='
				valueOf = before[max(i-1, 0)]
			}
			continue
		case word == "--":
			return // what follows belongs to the guest (mur run)
		case strings.HasPrefix(word, "-") && len(word) > 1:
			if name, ok := takesValue(flags, word); ok {
				valueOf = name
			}
			continue
		}
		switch {
		case cmd == nil && word == "help":
			cmd = &command{name: "help"} // mur help COMMAND|TOPIC: no command of its own
		case cmd == nil:
			if cmd = find(cmds, word); cmd == nil {
				return
			}
			flags = commandFlags(cmd)
		case len(cmd.subs) > 0 && sub == nil && find(cmd.subs, word) != nil:
			sub = find(cmd.subs, word)
			flags = commandFlags(sub)
		default:
			positional++
		}
	}
	if valueOf != "" && cur == "=" { // bash: the word at --flag=<TAB> is "="
		cur = ""
	}
	var out []string
	switch {
	case valueOf != "":
		name := strings.TrimLeft(valueOf, "-")
		if len(name) == 1 {
			if f := flags.ShorthandLookup(name); f != nil {
				name = f.Name
			}
		}
		out = flagValues(flags, name)
	case strings.HasPrefix(cur, "--") && strings.Contains(cur, "="):
		name, val, _ := strings.Cut(strings.TrimPrefix(cur, "--"), "=")
		for _, v := range flagValues(flags, name) {
			if strings.HasPrefix(v, val) {
				out = append(out, "--"+name+"="+v)
			}
		}
		cur = ""
	case strings.HasPrefix(cur, "-"):
		flags.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				out = append(out, "--"+f.Name)
			}
		})
		if cmd == nil {
			out = append(out, "--version")
		}
	case cmd == nil:
		out = append(names(cmds), "help")
	case cmd.name == "help" || cmd.name == "completion":
		if positional == 0 && cmd.name == "help" {
			out = append(names(cmds), topicNames()...)
		} else if positional == 0 {
			out = []string{"bash", "fish", "zsh"}
		}
	case len(cmd.subs) > 0 && sub == nil && positional == 0:
		out = names(cmd.subs)
		if slices.Contains(artifactArgs, cmd.name) {
			out = append(out, declaredRefs(dir)...)
		}
	case sub == nil && slices.Contains(artifactArgs, cmd.name):
		// mur run takes one artifact; the words after it are the guest's.
		if cmd.passThrough && positional > 0 {
			return
		}
		out = declaredRefs(dir)
	}
	sort.Strings(out)
	out = slices.Compact(out)
	for _, c := range out {
		if strings.HasPrefix(c, cur) {
			io.WriteString(w, c+"\n")
		}
	}
}

// commandFlags is every flag c accepts, globals included; c nil is mur's own.
func commandFlags(c *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet("complete", pflag.ContinueOnError)
	(&globals{}).register(fs)
	fs.BoolP("help", "h", false, "")
	if c == nil {
		fs.Bool("version", false, "")
	} else if c.flags != nil {
		c.flags(fs)
	}
	return fs
}

// takesValue reports whether word is a flag of fs that takes the next word as its value, and
// returns the flag as written.
func takesValue(fs *pflag.FlagSet, word string) (string, bool) {
	if strings.Contains(word, "=") {
		return "", false
	}
	var f *pflag.Flag
	if strings.HasPrefix(word, "--") {
		f = fs.Lookup(word[2:])
	} else if len(word) == 2 {
		f = fs.ShorthandLookup(word[1:])
	}
	if f == nil || f.NoOptDefVal != "" {
		return "", false
	}
	return word, true
}

// declaredRefs are the artifacts the project's murmur.yaml declares, and their scopes (acme/),
// for a reference to be completed. A folder outside any project, or a murmur.yaml that doesn't
// parse, offers none: completion never prints an error.
func declaredRefs(dir string) []string {
	root, err := fetch.FindProject(dir)
	if err != nil {
		return nil
	}
	c, err := manifest.Load(filepath.Join(root, manifest.FileName))
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range c.Artifacts {
		name := a.Name.String()
		out = append(out, name)
		if scope, _, ok := strings.Cut(name, "/"); ok {
			out = append(out, scope+"/")
		}
	}
	return out
}
