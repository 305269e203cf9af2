package manifest

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/yamlnode"
)

// Editing murmur.yaml, as `go mod edit` edits go.mod: the file is parsed into a yaml.Node and
// only the text of the nodes that change is rewritten, at the positions the nodes give, so that
// every comment, blank line, key order and quoting style the user chose stays as it was. A shape
// the splicing does not know (a flow sequence of artifacts) is re-encoded from the edited node
// instead, which keeps comments and order but not spacing. Every result is parsed again, and
// refused unless it declares exactly what was asked.

// SetArtifact returns data with name declared at version: the entry's version changed in place,
// or a new entry appended to artifacts: in the style of the entries already there.
func SetArtifact(data []byte, p string, name ref.Name, version string) ([]byte, error) {
	doc, root, err := editRoot(data, p)
	if err != nil {
		return nil, err
	}
	lines := splitLines(data)
	seqKey, seq := mapValue(root, "artifacts")
	var out []byte
	switch {
	case seq == nil || seq.Kind == yaml.ScalarNode && seq.Tag == "!!null":
		out = appendArtifacts(lines, seqKey, name, version)
	case seq.Kind != yaml.SequenceNode:
		return nil, errs.New(errs.InvalidManifest, "%s:%d: artifacts must be a list; fix it before mur edits the file", p, seq.Line)
	default:
		item := findItem(seq, name)
		switch {
		case item != nil:
			out, err = setVersion(lines, item, version)
		case seq.Style&yaml.FlowStyle != 0 || len(seq.Content) == 0:
			out, err = reencode(doc, func() { seq.Style = 0; seq.Content = append(seq.Content, newEntry(name, version)) })
		default:
			out = appendItem(lines, seq, name, version)
		}
		if err != nil {
			return nil, err
		}
	}
	return checkEdit(out, p, func(c *Capsule) bool {
		a, err := c.Find(name.String())
		return err == nil && a.Version == version
	})
}

// RemoveArtifact returns data without name's entry, with the comment lines right above it.
func RemoveArtifact(data []byte, p string, name ref.Name) ([]byte, error) {
	doc, root, err := editRoot(data, p)
	if err != nil {
		return nil, err
	}
	_, seq := mapValue(root, "artifacts")
	var item *yaml.Node
	if seq != nil && seq.Kind == yaml.SequenceNode {
		item = findItem(seq, name)
	}
	if item == nil {
		return nil, errs.New(errs.NotFound, "%s does not declare %s; nothing was removed", p, name)
	}
	var out []byte
	if seq.Style&yaml.FlowStyle != 0 {
		out, err = reencode(doc, func() {
			for i, it := range seq.Content {
				if it == item {
					seq.Content = append(seq.Content[:i], seq.Content[i+1:]...)
					break
				}
			}
		})
		if err != nil {
			return nil, err
		}
	} else {
		lines := splitLines(data)
		first := itemLine(item) - 1
		last := lastLine(item) - 1
		for first > 0 && isCommentLine(lines[first-1]) {
			first--
		}
		out = joinLines(append(append([]string{}, lines[:first]...), lines[last+1:]...))
	}
	return checkEdit(out, p, func(c *Capsule) bool {
		_, err := c.Find(name.String())
		return err != nil
	})
}

func editRoot(data []byte, p string) (*yaml.Node, *yaml.Node, error) {
	doc, err := yamlnode.DecodeDocument(data)
	if err != nil {
		return nil, nil, errs.Wrap(err, errs.InvalidManifest, "%s: %s; fix it before mur edits it", p, err.Error())
	}
	if doc == nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, errs.New(errs.InvalidManifest, "%s is not a mapping; fix it before mur edits it", p)
	}
	return doc, doc.Content[0], nil
}

func mapValue(m *yaml.Node, key string) (k, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

func findItem(seq *yaml.Node, name ref.Name) *yaml.Node {
	for _, it := range seq.Content {
		if it.Kind != yaml.MappingNode {
			continue
		}
		if _, v := mapValue(it, "name"); v != nil && v.Value == name.String() {
			return it
		}
	}
	return nil
}

// setVersion rewrites the version scalar of item in place, keeping its quotes, or adds the key
// beside name when the entry has none (latest).
func setVersion(lines []string, item *yaml.Node, version string) ([]byte, error) {
	if _, v := mapValue(item, "version"); v != nil && v.Kind == yaml.ScalarNode {
		l, start := v.Line-1, v.Column-1
		end := scalarEnd(lines[l], start, v)
		text := quoteLike(lines[l][start:end], version)
		lines[l] = lines[l][:start] + text + lines[l][end:]
		return joinLines(lines), nil
	}
	_, nameNode := mapValue(item, "name")
	if nameNode == nil {
		return nil, errs.New(errs.InvalidManifest, "line %d: the entry has no name", item.Line)
	}
	l := nameNode.Line - 1
	if item.Style&yaml.FlowStyle != 0 {
		end := scalarEnd(lines[l], nameNode.Column-1, nameNode)
		lines[l] = lines[l][:end] + ", version: " + quoteVersion(version) + lines[l][end:]
		return joinLines(lines), nil
	}
	indent := strings.Repeat(" ", item.Column-1)
	out := append(append(append([]string{}, lines[:l+1]...), indent+"version: "+quoteVersion(version)), lines[l+1:]...)
	return joinLines(out), nil
}

// appendItem adds an entry after the sequence's last one, shaped like its first.
func appendItem(lines []string, seq *yaml.Node, name ref.Name, version string) []byte {
	first, last := seq.Content[0], seq.Content[len(seq.Content)-1]
	dash := strings.Repeat(" ", dashColumn(lines, first))
	var add []string
	if first.Style&yaml.FlowStyle != 0 {
		add = []string{fmt.Sprintf("%s- { name: %s, version: %s }", dash, name, quoteVersion(version))}
	} else {
		inner := strings.Repeat(" ", first.Column-1)
		add = []string{dash + "- name: " + name.String(), inner + "version: " + quoteVersion(version)}
	}
	at := lastLine(last)
	out := append(append(append([]string{}, lines[:at]...), add...), lines[at:]...)
	return joinLines(out)
}

// appendArtifacts writes an artifacts: list where there is none, or where its value is null
// (`artifacts:`, `artifacts: ~`). An empty `artifacts: []` never gets here: SetArtifact
// re-encodes a flow or empty sequence instead.
func appendArtifacts(lines []string, key *yaml.Node, name ref.Name, version string) []byte {
	entry := []string{"  - name: " + name.String(), "    version: " + quoteVersion(version)}
	if key == nil {
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		return joinLines(append(append(lines, "artifacts:"), entry...))
	}
	l := key.Line - 1
	// "artifacts:" stays as written, comment and all; a null value ("artifacts: ~") is taken
	// out of the line.
	line := lines[l]
	colon := key.Column - 1 + len(key.Value)
	if colon < len(line) && line[colon] == ':' {
		rest := line[colon+1:]
		value := strings.TrimSpace(rest)
		if c := strings.Index(rest, "#"); c >= 0 {
			value = strings.TrimSpace(rest[:c])
		}
		if value != "" {
			i := strings.Index(rest, value)
			line = line[:colon+1] + strings.TrimRight(rest[:i], " ") + strings.TrimPrefix(rest[i+len(value):], "")
			line = strings.TrimRight(line, " ")
		}
	}
	out := append(append(append([]string{}, lines[:l]...), line), entry...)
	return joinLines(append(out, lines[l+1:]...))
}

// dashColumn is the column (0-based) of the "- " in front of a block sequence item.
func dashColumn(lines []string, item *yaml.Node) int {
	line := lines[item.Line-1]
	for i := item.Column - 2; i >= 0; i-- {
		if line[i] == '-' {
			return i
		}
	}
	return max(item.Column-3, 0)
}

// itemLine is the line of an item's "- ", which for a block mapping is its first key's line.
func itemLine(n *yaml.Node) int { return n.Line }

// lastLine is the last line any node under n stands on.
func lastLine(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

func isCommentLine(s string) bool { return strings.HasPrefix(strings.TrimSpace(s), "#") }

// scalarEnd is where the scalar n starting at start on line ends.
func scalarEnd(line string, start int, n *yaml.Node) int {
	switch {
	case start < len(line) && (line[start] == '"' || line[start] == '\''):
		if i := strings.IndexByte(line[start+1:], line[start]); i >= 0 {
			return start + 1 + i + 1
		}
	case start+len(n.Value) <= len(line):
		return start + len(n.Value)
	}
	return len(line)
}

// quoteLike writes version with the quotes old had; a plain old value stays plain unless YAML
// would read the new one bare as something else than that string.
func quoteLike(old, version string) string {
	switch {
	case strings.HasPrefix(old, `"`):
		return `"` + version + `"`
	case strings.HasPrefix(old, "'"):
		return "'" + version + "'"
	}
	var x any
	if !strings.EqualFold(old, ref.Latest) && yaml.Unmarshal([]byte(version), &x) == nil {
		if s, ok := x.(string); ok && s == version {
			return version
		}
	}
	return quoteVersion(version)
}

// quoteVersion is how mur writes a version it adds: quoted, as the README's examples are, so
// that 1.10 never becomes a number; latest stays bare.
func quoteVersion(v string) string {
	if v == ref.Latest {
		return v
	}
	return `"` + v + `"`
}

func newEntry(name ref.Name, version string) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "name"}, {Kind: yaml.ScalarNode, Value: name.String()},
		{Kind: yaml.ScalarNode, Value: "version"}, {Kind: yaml.ScalarNode, Value: version, Style: yaml.DoubleQuotedStyle},
	}}
}

func reencode(doc *yaml.Node, edit func()) ([]byte, error) {
	edit()
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, errs.Wrap(err, errs.Internal, "re-encoding murmur.yaml: %v", err)
	}
	return b.Bytes(), nil
}

func splitLines(data []byte) []string {
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func joinLines(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

func checkEdit(out []byte, p string, ok func(*Capsule) bool) ([]byte, error) {
	c, err := Parse(out, p)
	if err != nil {
		return nil, errs.Wrap(err, errs.Internal, "editing %s would make it unreadable (%s); nothing was written; this is a bug in mur, please report it with the file", p, errs.Message(err))
	}
	if !ok(c) {
		return nil, errs.New(errs.Internal, "editing %s did not give what was asked; nothing was written; this is a bug in mur, please report it with the file", p)
	}
	return out, nil
}
