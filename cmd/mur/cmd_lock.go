package main

func lockCmd() *command {
	return &command{name: "lock", short: "change murmur.lock", subs: []*command{
		{name: "forget-scope", args: "SCOPE", short: "forget a scope's owner pin", run: notYet("lock forget-scope")},
	}}
}
