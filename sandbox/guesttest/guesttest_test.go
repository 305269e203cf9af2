package guesttest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestCommandsMatchTheGuest: Build accepts exactly the commands the guest's main.go dispatches
// on, so a test can't ask for a behaviour the guest lacks, nor miss one it gained.
func TestCommandsMatchTheGuest(t *testing.T) {
	t.Parallel()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, GoGuestDir, "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "commands" || len(vs.Values) != 1 {
			return true
		}
		for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
			name, err := strconv.Unquote(e.(*ast.KeyValueExpr).Key.(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, name)
		}
		return false
	})
	slices.Sort(found)
	if !slices.Equal(found, commands) {
		t.Errorf("the guest's main.go dispatches on %v; guesttest knows %v", found, commands)
	}
}
