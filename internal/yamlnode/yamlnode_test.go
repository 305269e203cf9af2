package yamlnode

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"a: 1":                   "a mapping",
		"- 1":                    "a list",
		"hello":                  `"hello"`,
		"~":                      "nothing",
		strings.Repeat("x", 100): `"` + strings.Repeat("x", 77) + `..."`,
	} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
			t.Fatal(err)
		}
		if got := Describe(doc.Content[0]); got != want {
			t.Errorf("Describe(%q) = %s, want %s", src, got, want)
		}
	}
	if !IsNull(nil) || !IsNull(&yaml.Node{}) || Describe(nil) != "nothing" {
		t.Error("an absent node is not null")
	}
}

// Decode refuses what the YAML parser would follow or half read: bytes that are not UTF-8, a
// second document, and input the parser can't parse; it names the line where it can.
func TestDecode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		data    string
		problem Problem
		line    int
		null    bool
	}{
		{"one document", "a: 1\n", 0, 0, false},
		{"empty", "", 0, 0, true},
		{"only comments", "# nothing\n", 0, 0, true},
		{"not UTF-8", "a: 1\nb: \xff\n", NotUTF8, 2, false},
		{"a second document", "a: 1\n---\nb: 2\n", SecondDocument, 2, false},
		{"a second document that does not parse", "a: 1\n---\n[\n", SecondDocument, 1, false},
		{"not YAML", "a: [1\n", NotYAML, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, err := Decode([]byte(c.data))
			if c.problem == 0 {
				if err != nil || (root == nil) != c.null {
					t.Fatalf("root %v, err %v", root, err)
				}
				if root != nil && root.Kind != yaml.MappingNode {
					t.Fatalf("root is %v, want the document's mapping", root.Kind)
				}
				return
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Problem != c.problem || (c.line != 0 && de.Line != c.line) || root != nil {
				t.Fatalf("err %#v, root %v", err, root)
			}
		})
	}
}
