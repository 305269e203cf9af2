package main

func pullCmd() *command {
	return &command{name: "pull", args: "[REF...]", short: "pull artifacts into the CAS, the lock and tools/", run: notYet("pull")}
}
