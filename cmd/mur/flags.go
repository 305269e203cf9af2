package main

import (
	"github.com/spf13/pflag"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/ref"
)

// The flags several commands share, each declared here once: the same name, shorthand, default
// and words wherever it appears, and one check of its value. A command registers the group; it
// never declares one of these flags itself (flags_test.go).

// valuesAnnotation lists, on a flag, the values a TAB offers for it (complete.go).
const valuesAnnotation = "mur-values"

// onlyWithAnnotation marks a flag that serves another one only (mur info's --store, for
// --bundle-out), so that no hint offers it on its own.
const onlyWithAnnotation = "mur-only-with"

// readsStores reports whether a command's flags take a --store to read artifacts from.
func readsStores(fs *pflag.FlagSet) bool {
	f := fs.Lookup("store")
	return f != nil && len(f.Annotations[onlyWithAnnotation]) == 0
}

// platformFlag is --platform.
type platformFlag struct {
	value string
	all   bool // "all" is a choice: every platform murmur.lock pins
}

// registerPins is --platform for the commands that act on murmur.lock's pins (pull, add, lock,
// verify, warm): this machine's by default, and where the command can span them (all), every
// platform the lock pins. verb says what the command does for the platform.
func (f *platformFlag) registerPins(fs *pflag.FlagSet, verb string, all bool) {
	f.all = all
	usage := "platform to " + verb + " (default: this machine's)"
	values := append([]string{ref.PlatformAny}, ref.KnownPlatforms...)
	if all {
		usage = "platform to " + verb + ", or all: every platform murmur.lock pins (default: this machine's)"
		values = append(values, "all")
	}
	fs.StringVar(&f.value, "platform", "", usage)
	_ = fs.SetAnnotation("platform", valuesAnnotation, values)
}

// registerPayload is --platform for the commands that publish payloads (push, index): the
// platform they run on, any by default. A payload has one platform, so all is none.
func (f *platformFlag) registerPayload(fs *pflag.FlagSet) {
	fs.StringVar(&f.value, "platform", ref.PlatformAny, "the platform the payloads run on (any, or one such as linux-x86_64)")
	_ = fs.SetAnnotation("platform", valuesAnnotation, append([]string{ref.PlatformAny}, ref.KnownPlatforms...))
}

// check normalises the value (linux/amd64 is linux-x86_64) and refuses one that is no platform,
// naming the choices: the one check of every --platform.
func (f *platformFlag) check() error { return checkPlatform(&f.value, f.all) }

// defaultJobs is --jobs' default.
const defaultJobs = 4

// downloadFlags are --jobs and --connections, for the commands that bring artifacts in.
type downloadFlags struct {
	jobs        int
	connections int
}

// register adds --connections, and --jobs when the command downloads several artifacts at once.
func (f *downloadFlags) register(fs *pflag.FlagSet, jobs bool) {
	if jobs {
		fs.IntVar(&f.jobs, "jobs", defaultJobs, "downloads in flight, as slots of 8 MiB of blob (small artifacts share one and download together); also bounds their connections")
	}
	fs.IntVar(&f.connections, "connections", fetch.DefaultConnections, "connections one large blob is fetched over, when its server serves ranges (1: one stream)")
}

// registerOutput is -o/--output: the file, or folder, a command writes; def is its default.
func registerOutput(fs *pflag.FlagSet, out *string, def, usage string) {
	fs.StringVarP(out, "output", "o", def, usage)
}
