package lock

import (
	"fmt"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// MurmurSource is the only source that may serve the reserved scope murmur; no configuration or
// lock can change it.
const MurmurSource = "github:murmur-nexus/default-artifacts"

// DefaultSource is the source of a scope that config.yaml doesn't map: github:S/murmur-artifacts,
// MurmurSource for murmur, and "" for local, which no source serves.
func DefaultSource(scope string) string {
	switch scope {
	case ref.ScopeLocal:
		return ""
	case ref.ScopeMurmur:
		return MurmurSource
	}
	return "github:" + scope + "/murmur-artifacts"
}

// CheckScopeSource is the one home of the scope reservations: scope local names files on disk and
// no source serves it; scope murmur is served only by MurmurSource (owners compare as GitHub
// compares them, case-insensitively). source "" asks only whether any source may serve scope.
// The error is a usage error whose sentence says what is wrong; callers wrap it with their own
// token and say what to do.
func CheckScopeSource(scope, source string) error {
	switch {
	case scope == ref.ScopeLocal:
		return errs.New(errs.Usage, "scope local is reserved for files on disk and is never served by a source")
	case scope == ref.ScopeMurmur && source != "" && !strings.EqualFold(source, MurmurSource):
		return errs.New(errs.Usage, "scope murmur is reserved and served only by %s, not %s", MurmurSource, source)
	}
	return nil
}

// ParseSource splits `github:OWNER/REPO`, holding both to GitHub's own rules: an owner (a login) is
// 1 to 39 letters, digits and '-', neither starting nor ending with '-'; a repository name is 1 to
// 100 letters, digits, '.', '_' and '-', and not "." or "..". The error is a usage error whose
// sentence says what is wrong, so that callers can wrap it with their own token and file.
func ParseSource(s string) (owner, repo string, err error) {
	rest, ok := strings.CutPrefix(s, "github:")
	if !ok {
		return "", "", errs.New(errs.Usage, "source %q is not of the form github:OWNER/REPO", s)
	}
	owner, repo, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", errs.New(errs.Usage, "source %q has no /REPO; write it as github:OWNER/REPO", s)
	}
	if !validLogin(owner) {
		return "", "", errs.New(errs.Usage, "source %q: %q is not a GitHub owner (1 to 39 letters, digits and '-', neither starting nor ending with '-')", s, owner)
	}
	if !validRepoName(repo) {
		return "", "", errs.New(errs.Usage, "source %q: %q is not a GitHub repository name (1 to 100 letters, digits, '.', '_' and '-')", s, repo)
	}
	return owner, repo, nil
}

func validLogin(s string) bool {
	if len(s) < 1 || len(s) > 39 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func validRepoName(s string) bool {
	if len(s) < 1 || len(s) > 100 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// CheckOwner is the one owner-changed check (SPEC section 6). It compares what a source pull of
// scope sees with the pin: source is the repository the configuration names now, and ownerID
// GitHub's current owner id for it, or 0 when it is not known yet (the check made before any
// request). A pin to another repository, or another owner id, is an owner-changed error that
// names the scope, both sides and the way to accept an expected move.
func (p ScopePin) CheckOwner(scope, source string, ownerID int64) error {
	if !strings.EqualFold(source, p.Source) {
		return errs.New(errs.OwnerChanged, "scope %s is pinned to %s (owner id %d) in murmur.lock, but the configuration now names %s; nothing was fetched. If the move is expected, run `mur lock forget-scope %s` and pull again",
			scope, p.Source, p.OwnerID, source, scope)
	}
	if ownerID == 0 || ownerID == p.OwnerID {
		return nil
	}
	return errs.New(errs.OwnerChanged, "scope %s (%s) is pinned to GitHub owner id %d, and the repository's owner is now id %d; a new owner may mean a transfer or a take-over of the name, so nothing was fetched. If you expected the transfer, run `mur lock forget-scope %s` and pull again",
		scope, p.Source, p.OwnerID, ownerID, scope)
}

// describePin says what is wrong with a scope pin, or "".
func describePin(scope string, pin ScopePin) string {
	if err := ref.ValidateSegment(scope); err != nil {
		return "the scope " + errs.Message(err)
	}
	if _, _, err := ParseSource(pin.Source); err != nil {
		return errs.Message(err)
	}
	if err := CheckScopeSource(scope, pin.Source); err != nil {
		return errs.Message(err)
	}
	switch {
	case pin.OwnerID <= 0:
		return fmt.Sprintf("owner_id must be a positive GitHub id, found %d", pin.OwnerID)
	case pin.RepoID <= 0:
		return fmt.Sprintf("repo_id must be a positive GitHub id, found %d", pin.RepoID)
	}
	return ""
}
