package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func lockCmd() *command {
	return &command{name: "lock", short: "change murmur.lock", examples: `mur lock forget-scope acme`, subs: []*command{
		{
			name:  "forget-scope",
			args:  "SCOPE",
			short: "forget a scope's owner pin",
			long: `Removes the owner pin of SCOPE from murmur.lock, so that the next source pull of SCOPE
pins the repository's current owner again. Use it after a transfer of the repository that you
expected; mur refuses a changed owner until then. Pinned artifact hashes are kept.`,
			examples: `mur lock forget-scope acme
mur lock forget-scope acme --json`,
			run: runForgetScope,
		},
	}}
}

// forgetResult is the --json output of `mur lock forget-scope`.
type forgetResult struct {
	Lock    string   `json:"lock"`
	Scope   string   `json:"scope"`
	Removed bool     `json:"removed"`
	Pin     *pinJSON `json:"pin,omitempty"`
}

type pinJSON struct {
	Source  string `json:"source"`
	OwnerID int64  `json:"owner_id"`
	RepoID  int64  `json:"repo_id"`
}

func runForgetScope(e *env, args []string) error {
	if len(args) != 1 {
		return usagef("mur lock forget-scope takes exactly one SCOPE, found %d arguments; for example: mur lock forget-scope acme", len(args))
	}
	scope := args[0]
	if err := ref.ValidateSegment(scope); err != nil {
		return usagef("scope %s; a scope is the lowercase GitHub owner, for example acme", errs.Message(err))
	}
	wd, err := os.Getwd()
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't find the current folder: %v", err)
	}
	dir, err := fetch.FindProject(wd)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, lock.FileName)
	var removed *lock.ScopePin
	err = lock.Update(e.ctx, path, func(l *lock.Lock) error {
		if pin, ok := l.Pin(scope); ok {
			removed = &pin
			l.ForgetScope(scope)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if e.g.json {
		res := forgetResult{Lock: path, Scope: scope, Removed: removed != nil}
		if removed != nil {
			res.Pin = &pinJSON{Source: removed.Source, OwnerID: removed.OwnerID, RepoID: removed.RepoID}
		}
		return e.JSON(res)
	}
	if removed == nil {
		fmt.Fprintf(e.stdout, "%s has no owner pin for scope %s; nothing changed\n", path, scope)
		return nil
	}
	fmt.Fprintf(e.stdout, "forgot scope %s in %s (was %s, owner id %d, repo id %d); the next source pull of %s pins its current owner\n",
		scope, path, removed.Source, removed.OwnerID, removed.RepoID, scope)
	return nil
}
