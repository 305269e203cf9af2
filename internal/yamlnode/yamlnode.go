// Package yamlnode is the one way mur's parsers read YAML: Decode and DecodeDocument turn bytes
// into a node and refuse hostile input (bytes that are not UTF-8, a parser panic, a second
// document) the same way everywhere, and IsNull and Describe are the two questions every parser
// asks of a node, so that the manifest, the lock, the config and the packed manifest describe
// bad input in the same words.
package yamlnode

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// IsNull reports whether n is absent or an explicit null.
func IsNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// Describe names what a node is, for "expected X, found Y" messages: "a mapping", "a list",
// the quoted scalar (cut at 80 characters), or "nothing".
func Describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "nothing"
		}
		v := n.Value
		if len(v) > 80 {
			v = v[:77] + "..."
		}
		return fmt.Sprintf("%q", v)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}
