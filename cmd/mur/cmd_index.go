package main

func indexCmd() *command {
	return &command{name: "index", args: "FILE.mur.zip... --scope S --release TAG", short: "write a murmur-index.json for a GitHub release", run: notYet("index")}
}
