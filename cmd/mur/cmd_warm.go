package main

func warmCmd() *command {
	return &command{name: "warm", args: "", short: "make the project runnable offline", run: notYet("warm")}
}
