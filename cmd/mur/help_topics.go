package main

import (
	"fmt"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/sandbox"
)

// helpTopic is a page of `mur help TOPIC`: reference that belongs to no one command. docs/TOPIC.md
// shows the same text, and TestDocsShowHelpTopics keeps the two equal.
type helpTopic struct {
	name  string
	short string
	text  func() string
}

func helpTopics() []helpTopic {
	return []helpTopic{
		{"environment", "the environment variables mur reads", environmentHelp},
		{"exit-codes", "what each exit status means, mur run's included", exitCodesHelp},
		{"tokens", "the error tokens of 'mur: TOKEN: …' and of --json's error.token", tokensHelp},
	}
}

func findTopic(name string) *helpTopic {
	for _, t := range helpTopics() {
		if t.name == name {
			return &t
		}
	}
	return nil
}

// exitDoc is one exit status and what it means.
type exitDoc struct {
	code    int
	meaning string
}

// exitCodes are the statuses of every command; the numbers come from the code that exits with
// them, and a test holds the list to exitStatus and to sandbox's Status constants.
func exitCodes() []exitDoc {
	return []exitDoc{
		{0, "success"},
		{1, "failure: any token but usage and interrupted ('mur help tokens'); also mur verify and " +
			"mur warm when they found a problem, mur push when one of its arguments failed, and " +
			"mur outdated --exit-code when an artifact is behind"},
		{exitStatus(errs.Usage), "usage: the command line can't be acted on; also mur alone, or a " +
			"command that needs a subcommand given none (the help is printed)"},
		{exitStatus(errs.Interrupted), "interrupted: Ctrl-C or SIGTERM stopped the command; what had " +
			"finished stays, and a second Ctrl-C kills mur at once"},
	}
}

// runExitCodes are mur run's statuses beyond the guest's own.
func runExitCodes() []exitDoc {
	return []exitDoc{
		{exitStatus(errs.Usage), "usage, as under every command"},
		{sandbox.StatusTimeout, "timeout: the guest ran past limits.timeout_s or --timeout"},
		{sandbox.StatusRunnerFailed, "mur failed before or around the run (the lock, --locked, the " +
			"CAS, the grants); stderr gives the token"},
		{sandbox.StatusNotExecutable, "the payload can't execute: not a WASI preview 1 core module " +
			"(invalid-artifact)"},
		{sandbox.StatusNotPulled, "the artifact is not pulled: not declared or pinned, or its blob is " +
			"not in the CAS (not-found)"},
		{sandbox.StatusInterrupted, "interrupted: Ctrl-C or SIGTERM stopped the guest"},
		{sandbox.StatusTrap, "the guest crashed: a trap, such as unreachable or an out-of-bounds " +
			"access (guest-crashed). A guest that dies of its memory limit keeps its own status, " +
			"and stderr says guest-crashed"},
	}
}

func exitCodesHelp() string {
	var b strings.Builder
	b.WriteString(wrap("", "The exit status says how a command ended; the token on stderr ('mur: TOKEN: …') "+
		"and in --json's error.token says why.") + "\n\nEvery command:\n")
	for _, d := range exitCodes() {
		b.WriteString(wrap(fmt.Sprintf("  %-5d", d.code), d.meaning) + "\n")
	}
	b.WriteString("\n" + wrap("", "mur run exits with the guest's own status when the guest ran to its end, "+
		"and otherwise:") + "\n")
	for _, d := range runExitCodes() {
		b.WriteString(wrap(fmt.Sprintf("  %-5d", d.code), d.meaning) + "\n")
	}
	return b.String()
}

func tokensHelp() string {
	var b strings.Builder
	b.WriteString(wrap("", "Every error prints as 'mur: TOKEN: sentence' on stderr; with --json, the "+
		"envelope's error is {\"token\": TOKEN, \"message\": sentence}. A warning prints as "+
		"'mur: warning: …' and the command goes on; a few name a token too: no-provenance "+
		"(below), and stale-index, when latest was resolved offline from a cached version list. "+
		"The tokens:") + "\n\n")
	for i, d := range errs.Docs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(string(d.Token) + "\n" + wrap("    ", d.Meaning) + "\n")
	}
	return b.String()
}

// envDoc is one environment variable and what mur does with it.
type envDoc struct {
	name    string
	meaning string
}

// environment lists every variable mur and mur-provenance read, themselves or through the
// libraries they call. TestEnvironmentCoversTheCode finds the ones the code reads by name.
func environment() []envDoc {
	return []envDoc{
		{"MURMUR_HOME", "the Murmur home: the CAS, the compiled cache, state stores and the home's " +
			"config.yaml (default $HOME/.murmur); --home overrides it"},
		{"HOME", "where the Murmur home is when MURMUR_HOME is unset; it must be absolute"},
		{"MUR_OFFLINE", "any value but empty, 0 or false is --offline: what needs the network fails " +
			"with offline"},
		{"GITHUB_TOKEN", "a GitHub token, for private repositories and a higher rate limit; sent only " +
			"to URLs under MUR_GITHUB_API_BASE, never to github.com's download links or the storage " +
			"hosts they redirect to"},
		{"MUR_GITHUB_API_BASE", "the GitHub API base URL (default https://api.github.com), for GitHub " +
			"Enterprise or a test server"},
		{"MUR_NETWORK_TIMEOUT", "how long a registry or GitHub may stay silent before a request fails " +
			"(default 30s); a transfer that keeps moving is never cut off; anything but a positive " +
			"duration is a usage error"},
		{"MUR_COMPILE_WORKERS", "goroutines that compile one module's functions (default one per core, " +
			"at most 8); anything but a whole number from 1 to 256 is a usage error"},
		{"MUR_PROVENANCE_HELPER", "the mur-provenance executable that checks provenance bundles " +
			"(default: beside mur, else on PATH)"},
		{"MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES", "the ceiling on a packed payload's decompressed " +
			"size, in bytes (default 524288000, 500 MiB); plus 5 MiB it also bounds the download of a " +
			"blob whose size no manifest declares"},
		{"MURMUR_MAX_PULL_DECOMPRESSED_BYTES", "what the payloads one pull stages into tools/ may " +
			"decompress to together, in bytes (default 1073741824, 1 GiB); over config.yaml's " +
			"pull.max_decompressed"},
		{"NO_COLOR", "any value but empty turns colour off"},
		{"TERM", "dumb turns colour off, as NO_COLOR does"},
		{"DOCKER_CONFIG", "the folder of the docker config.json whose credentials and helpers " +
			"registries are logged in with (default ~/.docker)"},
		{"REGISTRY_AUTH_FILE", "without a docker config, the auth.json to read instead (podman's)"},
		{"XDG_RUNTIME_DIR", "without either, $XDG_RUNTIME_DIR/containers/auth.json is read"},
		{"XDG_CONFIG_HOME", "and then $XDG_CONFIG_HOME/containers/auth.json (default ~/.config)"},
		{"SSL_CERT_FILE", "a PEM file of CA certificates to trust instead of the system's, for a " +
			"registry with a private CA (SSL_CERT_DIR: a folder of them)"},
		{"HTTPS_PROXY", "the proxy for HTTPS requests (and HTTP_PROXY, NO_PROXY, in either case), as " +
			"Go's net/http reads them"},
		{"MUR_TEST_SLOWDOWN", "for mur's own tests: a factor that stretches the few margins measured " +
			"on the clock, such as Ctrl-C's grace period; leave it unset"},
	}
}

func environmentHelp() string {
	var b strings.Builder
	b.WriteString(wrap("", "mur and mur-provenance read these environment variables. A guest of "+
		"mur run sees none of them: only the names env.allow in murmur.yaml lists, and PWD=/.") + "\n\n")
	for _, d := range environment() {
		if len(d.name) > 20 {
			b.WriteString("  " + d.name + "\n" + wrap(strings.Repeat(" ", 24), d.meaning) + "\n")
			continue
		}
		b.WriteString(wrap(fmt.Sprintf("  %-20s  ", d.name), d.meaning) + "\n")
	}
	return b.String()
}

// helpWidth is the column that help topics wrap at.
const helpWidth = 78

// wrap fills text into lines of at most helpWidth columns, the first starting with lead and the
// rest indented to lead's width.
func wrap(lead, text string) string {
	indent := strings.Repeat(" ", len([]rune(lead)))
	var b strings.Builder
	line := lead
	fresh := true
	for _, w := range strings.Fields(text) {
		if !fresh && len([]rune(line))+1+len([]rune(w)) > helpWidth {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line, fresh = indent, true
		}
		if !fresh {
			line += " "
		}
		line += w
		fresh = false
	}
	b.WriteString(strings.TrimRight(line, " "))
	return b.String()
}
