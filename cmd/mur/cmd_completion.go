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
				writeBash(e.stdout, commands())
			case "zsh":
				fmt.Fprintln(e.stdout, "#compdef mur\n# zsh completion for mur, through zsh's bash completion support.\nautoload -U +X bashcompinit && bashcompinit")
				writeBash(e.stdout, commands())
			case "fish":
				writeFish(e.stdout, commands())
			default:
				return usagef("mur completion: shell %q is not one of bash, zsh, fish", args[0])
			}
			return nil
		},
	}
}

// flagNames lists --name (and -x) of every flag a command accepts, globals included.
func flagNames(c *command) []string {
	fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	(&globals{}).register(fs)
	fs.BoolP("help", "h", false, "")
	if c.flags != nil {
		c.flags(fs)
	}
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		out = append(out, "--"+f.Name)
		if f.Shorthand != "" {
			out = append(out, "-"+f.Shorthand)
		}
	})
	sort.Strings(out)
	return out
}

func names(cmds []*command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.name)
	}
	sort.Strings(out)
	return out
}

func writeBash(w io.Writer, cmds []*command) {
	fmt.Fprint(w, `# bash completion for mur: source <(mur completion bash)
_mur() {
  local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" sub="" i w words
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    case "$w" in
      -*) ;;
      *) if [ -z "$cmd" ]; then cmd="$w"; elif [ -z "$sub" ]; then sub="$w"; fi ;;
    esac
  done
  case "$cmd/$sub" in
`)
	top := append(names(cmds), "--help", "--home", "--json", "--offline", "--quiet", "--version", "-q", "help")
	fmt.Fprintf(w, "    /) words=%q ;;\n", strings.Join(top, " "))
	for _, c := range cmds {
		if len(c.subs) > 0 {
			fmt.Fprintf(w, "    %s/) words=%q ;;\n", c.name, strings.Join(names(c.subs), " "))
			for _, s := range c.subs {
				fmt.Fprintf(w, "    %s/%s) words=%q ;;\n", c.name, s.name, strings.Join(flagNames(s), " "))
			}
			continue
		}
		words := flagNames(c)
		if c.name == "completion" {
			words = append([]string{"bash", "fish", "zsh"}, words...)
		}
		fmt.Fprintf(w, "    %s/*) words=%q ;;\n", c.name, strings.Join(words, " "))
	}
	fmt.Fprint(w, `    help/*) words="$(echo`)
	for _, n := range names(cmds) {
		fmt.Fprintf(w, " %s", n)
	}
	fmt.Fprint(w, `)" ;;
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _mur mur
`)
}

func writeFish(w io.Writer, cmds []*command) {
	fmt.Fprintln(w, "# fish completion for mur: mur completion fish > ~/.config/fish/completions/mur.fish")
	fmt.Fprintln(w, "complete -c mur -l version -d \"print mur's version\"")
	gfs := pflag.NewFlagSet("globals", pflag.ContinueOnError)
	(&globals{}).register(gfs)
	gfs.VisitAll(func(f *pflag.Flag) {
		fmt.Fprintf(w, "complete -c mur -l %s%s -d %s\n", f.Name, shortFish(f), fishQuote(f.Usage))
	})
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
