package main

func packCmd() *command {
	return &command{name: "pack", args: "DIR [-o FILE]", short: "pack a folder into a .mur.zip", run: notYet("pack")}
}
