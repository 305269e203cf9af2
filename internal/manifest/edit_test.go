package manifest

import (
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/ref"
)

const editSrc = `# my capsule
name: demo
version: "1.0.0"

artifacts:
  # search
  - name: acme/grep          # the fast one
    version: "1.0.0"
  - name: acme/upper
    version: latest
capabilities:
  filesystem: { scope: "." }   # aligned comment
`

func TestSetArtifactKeepsTheRest(t *testing.T) {
	t.Parallel()
	grep, _ := ref.ParseName("acme/grep")
	upper, _ := ref.ParseName("acme/upper")
	sed, _ := ref.ParseName("acme/sed")
	cases := []struct {
		name    string
		src     string
		art     ref.Name
		version string
		want    string
	}{
		{"change in place", editSrc, grep, "1.1.0", strings.Replace(editSrc, `version: "1.0.0"
  - name: acme/upper`, `version: "1.1.0"
  - name: acme/upper`, 1)},
		{"latest to exact", editSrc, upper, "2.0.0", strings.Replace(editSrc, "version: latest", `version: "2.0.0"`, 1)},
		{"append block", editSrc, sed, "4.9.0", strings.Replace(editSrc, "    version: latest\n", "    version: latest\n  - name: acme/sed\n    version: \"4.9.0\"\n", 1)},
		{"append flow", "name: d\nartifacts:\n  - { name: acme/grep, version: 1.0.0 }  # x\n# tail\n", sed, "1.0.0",
			"name: d\nartifacts:\n  - { name: acme/grep, version: 1.0.0 }  # x\n  - { name: acme/sed, version: \"1.0.0\" }\n# tail\n"},
		{"plain stays plain", "name: d\nartifacts:\n  - { name: acme/grep, version: 1.0.0 }\n", grep, "1.2.0", "name: d\nartifacts:\n  - { name: acme/grep, version: 1.2.0 }\n"},
		{"flow without version", "name: d\nartifacts:\n  - { name: acme/grep }\n", grep, "1.2.0", "name: d\nartifacts:\n  - { name: acme/grep, version: \"1.2.0\" }\n"},
		{"no artifacts key", "name: d  # hi\n\n", sed, "1.0.0", "name: d  # hi\nartifacts:\n  - name: acme/sed\n    version: \"1.0.0\"\n"},
		{"empty artifacts key", "name: d\nartifacts:   # none yet\ncapabilities: {}\n", sed, "1.0.0", "name: d\nartifacts:   # none yet\n  - name: acme/sed\n    version: \"1.0.0\"\ncapabilities: {}\n"},
		{"empty flow list", "name: d\nartifacts: []\n", sed, "1.0.0", "name: d\nartifacts:\n  - name: acme/sed\n    version: \"1.0.0\"\n"},
		{"block without version", "name: d\nartifacts:\n  - name: acme/grep\n    capabilities: {}\n", grep, "1.2.0", "name: d\nartifacts:\n  - name: acme/grep\n    version: \"1.2.0\"\n    capabilities: {}\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SetArtifact([]byte(c.src), "murmur.yaml", c.art, c.version)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

func TestRemoveArtifact(t *testing.T) {
	t.Parallel()
	grep, _ := ref.ParseName("acme/grep")
	upper, _ := ref.ParseName("acme/upper")
	got, err := RemoveArtifact([]byte(editSrc), "murmur.yaml", grep)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(editSrc, "  # search\n  - name: acme/grep          # the fast one\n    version: \"1.0.0\"\n", "", 1)
	if string(got) != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	got, err = RemoveArtifact(got, "murmur.yaml", upper)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(got, "murmur.yaml")
	if err != nil || len(c.Artifacts) != 0 || !strings.Contains(string(got), "# aligned comment") {
		t.Fatalf("after removing both: %v\n%s", err, got)
	}
	if _, err := RemoveArtifact(got, "murmur.yaml", upper); err == nil || !strings.Contains(err.Error(), "does not declare acme/upper") {
		t.Fatalf("removing what is not declared: %v", err)
	}
	flow := "name: d\nartifacts: [ {name: acme/grep}, {name: acme/upper} ]\n"
	got, err = RemoveArtifact([]byte(flow), "murmur.yaml", grep)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := Parse(got, "m"); len(c.Artifacts) != 1 || c.Artifacts[0].Name != upper {
		t.Fatalf("flow removal: %s", got)
	}
}
