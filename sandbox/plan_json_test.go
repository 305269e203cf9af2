package sandbox

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/murmur-nexus/mur/state"
)

// run --explain-scope --json prints a Plan: every key, nested ones included, is snake_case like
// every other command's JSON.
func TestPlanJSONKeysAreSnakeCase(t *testing.T) {
	t.Parallel()
	p := Plan{
		Artifact: "acme/grep", Preopens: []Mount{{GuestPath: "/", HostPath: "/w"}},
		Subtrees: []Mount{{GuestPath: "/state", HostPath: "/s"}},
		States:   []state.Report{{Artifact: "acme/grep", Store: "cache", HostPath: "/s"}},
		EnvNames: []string{"HOME"},
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if !snake.MatchString(k) {
					t.Errorf("%s.%s is not snake_case", path, k)
				}
				walk(child, path+"."+k)
			}
		case []any:
			for _, child := range v {
				walk(child, path+"[]")
			}
		}
	}
	walk(v, "plan")
}
