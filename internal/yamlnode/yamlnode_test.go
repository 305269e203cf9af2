package yamlnode

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestDescribe(t *testing.T) {
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
