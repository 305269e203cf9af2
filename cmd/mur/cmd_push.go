package main

func pushCmd() *command {
	return &command{name: "push", args: "REF|FILE.mur.zip --store STORE", short: "publish an artifact to a store", run: notYet("push")}
}
