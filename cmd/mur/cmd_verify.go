package main

func verifyCmd() *command {
	return &command{name: "verify", args: "", short: "check the lock, the CAS, tools/ and compiled modules", run: notYet("verify")}
}
