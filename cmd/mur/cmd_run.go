package main

func runCmd() *command {
	return &command{name: "run", args: "ARTIFACT [-- ARGS...]", short: "run a pulled artifact in the sandbox", run: notYet("run")}
}
