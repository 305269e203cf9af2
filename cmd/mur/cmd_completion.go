package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

func completionCmd() *command {
	return &command{
		name:  "completion",
		args:  "bash|zsh|fish",
		short: "print a shell completion script",
		long: `Prints a script that completes mur's commands, subcommands and flags. Load it in the
current shell, or install it where your shell looks for completions.`,
		examples: `source <(mur completion bash)
mur completion bash > /etc/bash_completion.d/mur
mur completion zsh > "${fpath[1]}/_mur"
mur completion fish > ~/.config/fish/completions/mur.fish`,
		run: func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("mur completion takes one shell, bash, zsh or fish, found %d arguments; e.g. 'source <(mur completion bash)'", len(args))
			}
			switch args[0] {
			case "bash":
				writeBash(e.stdout)
			case "zsh":
				fmt.Fprintln(e.stdout, "#compdef mur\n# zsh completion for mur, through zsh's bash completion support.\nautoload -U +X bashcompinit && bashcompinit")
				writeBash(e.stdout)
			case "fish":
				writeFish(e.stdout, commands())
			default:
				return usagef("mur completion: shell %q is not one of bash, zsh, fish", args[0])
			}
			return nil
		},
	}
}

func names(cmds []*command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.name)
	}
	sort.Strings(out)
	return out
}

func writeBash(w io.Writer) {
	// The words are read by mur itself (complete.go): it knows which flags take a value and what
	// the project declares, which a static word list can't.
	fmt.Fprintf(w, `# bash completion for mur: source <(mur completion bash)
_mur() {
  local IFS=$'\n'
  COMPREPLY=($(mur %s "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _mur mur
`, completeCommand)
}

func writeFish(w io.Writer, cmds []*command) {
	fmt.Fprintln(w, "# fish completion for mur: mur completion fish > ~/.config/fish/completions/mur.fish")
	fmt.Fprintln(w, "complete -c mur -l version -d \"print mur's version\"")
	gfs := pflag.NewFlagSet("globals", pflag.ContinueOnError)
	(&globals{}).register(gfs)
	gfs.VisitAll(func(f *pflag.Flag) {
		fmt.Fprintf(w, "complete -c mur -l %s%s -d %s\n", f.Name, shortFish(f), fishQuote(f.Usage))
	})
	// Artifact names and flag values come from mur itself (complete.go).
	fmt.Fprintf(w, "complete -c mur -f -n '__fish_seen_subcommand_from %s' -a '(mur %s (commandline -opc)[2..-1] (commandline -ct))'\n", strings.Join(artifactArgs, " "), completeCommand)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c mur -f -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.short))
		if len(c.subs) > 0 {
			for _, s := range c.subs {
				fmt.Fprintf(w, "complete -c mur -f -n '__fish_seen_subcommand_from %s' -a %s -d %s\n", c.name, s.name, fishQuote(s.short))
				fishFlags(w, s, s.name)
			}
			continue
		}
		fishFlags(w, c, c.name)
	}
}

func fishFlags(w io.Writer, c *command, seen string) {
	if c.flags == nil {
		return
	}
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	c.flags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		fmt.Fprintf(w, "complete -c mur -n '__fish_seen_subcommand_from %s' -l %s%s -d %s\n", seen, f.Name, shortFish(f), fishQuote(f.Usage))
	})
}

func shortFish(f *pflag.Flag) string {
	if f.Shorthand == "" {
		return ""
	}
	return " -s " + f.Shorthand
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}
