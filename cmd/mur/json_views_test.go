package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/provenance"
)

// One JSON shape per result (docs/ARCHITECTURE.md): a result's own json tags are its --json
// shape, so none leaves a key out, and the view of it prints every key docs/json.md lists, in
// that order, even for a result that holds nothing.
func TestResultJSONShape(t *testing.T) {
	rt := reflect.TypeFor[fetch.Result]()
	for i := 0; i < rt.NumField(); i++ {
		if tag := rt.Field(i).Tag.Get("json"); strings.Contains(tag, "omitempty") {
			t.Errorf("fetch.Result.%s is tagged %q: a result's --json keys are always present", rt.Field(i).Name, tag)
		}
	}
	results := struct {
		Results []resultJSON `json:"results"`
	}{[]resultJSON{toResultJSON(fetch.Result{})}}
	got := keysOf(t, results, "results")
	if want := documentedKeys(t, "a pull's `results`"); !slices.Equal(got, want) {
		t.Errorf("a pull's result has the keys\n%v\nand docs/json.md lists\n%v", got, want)
	}
}

// mur trust show --json has every key docs/json.md lists for a root, a root never fetched
// through TUF included.
func TestTrustJSONShape(t *testing.T) {
	got := keysOf(t, trustJSON{Roots: rootsJSON([]provenance.RootStatus{{Instance: "github", Source: "embedded"}})}, "roots")
	if want := documentedKeys(t, "`trust refresh`, `trust show`"); !slices.Equal(got, want) {
		t.Errorf("a trusted root has the keys\n%v\nand docs/json.md lists\n%v", got, want)
	}
}

// keysOf is the keys, in order, of the first object of the list under key in v's --json.
func keysOf(t *testing.T, v any, key string) []string {
	t.Helper()
	var out bytes.Buffer
	if err := writeEnvelope(&out, v, nil); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &top); err != nil {
		t.Fatal(err)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(top[key], &list); err != nil || len(list) == 0 {
		t.Fatalf("%s: %v in\n%s", key, err, out.Bytes())
	}
	dec := json.NewDecoder(bytes.NewReader(list[0]))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' || tok == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 && dec.More() {
				keys = append(keys, tok)
				// Skip the value: a nested object's keys are not this one's.
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return keys
}

// documentedKeys is the keys docs/json.md's row for label lists at its top level: the words in
// `code`, leaving out what the parentheses say of them (nested keys, values).
func documentedKeys(t *testing.T, label string) []string {
	t.Helper()
	page := readDoc(t, "docs/json.md")
	_, row, ok := strings.Cut(page, "| "+label+" | ")
	if !ok {
		t.Fatalf("docs/json.md has no row %q", label)
	}
	row, _, _ = strings.Cut(row, " |\n")
	paren := regexp.MustCompile(`\([^()]*\)`)
	for paren.MatchString(row) {
		row = paren.ReplaceAllString(row, "")
	}
	if list := regexp.MustCompile("^`[a-z_]+`: "); list.MatchString(row) {
		// "`roots`: KEYS; `trusted_root`": the keys of each root, up to the ";".
		row, _, _ = strings.Cut(list.ReplaceAllString(row, ""), ";")
	}
	var keys []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row, -1) {
		keys = append(keys, m[1])
	}
	return keys
}
