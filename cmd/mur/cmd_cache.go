package main

func cacheCmd() *command {
	return &command{name: "cache", short: "inspect and keep the content-addressed store", subs: []*command{
		{name: "ls", short: "list blobs", run: notYet("cache ls")},
	}}
}
