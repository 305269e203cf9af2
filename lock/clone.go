package lock

import (
	"maps"
	"slices"
)

// Clone is a deep copy of l, so that a caller can try a change and put l back if it fails (a
// pull that pins many artifacts in one update, where one of them may conflict). A field added to
// Entry that holds a reference must be copied here too; TestCloneIsDeep changes each.
func (l *Lock) Clone() *Lock {
	c := &Lock{Scopes: maps.Clone(l.Scopes), Artifacts: slices.Clone(l.Artifacts), Warnings: slices.Clone(l.Warnings)}
	for i := range c.Artifacts {
		c.Artifacts[i] = c.Artifacts[i].clone()
	}
	return c
}
