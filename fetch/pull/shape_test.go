package pull_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// The pipeline is split along its phases (resolver, fetcher, attestor, committer, finisher) so
// that each can be read and tested alone: no type may grow past maxMethods methods, and no
// function past maxLines lines, or it is one to split again.
const (
	maxMethods = 25
	maxLines   = 80
)

// TestPackageShape reads the package's own files (not its tests) as go/parser sees them.
func TestPackageShape(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			what := fd.Name.Name
			if fd.Recv != nil {
				typ := recvType(fd.Recv.List[0].Type)
				methods[typ]++
				what = typ + "." + what
			}
			lines := fset.Position(fd.Body.Rbrace).Line - fset.Position(fd.Body.Lbrace).Line + 1
			if lines > maxLines {
				t.Errorf("%s (%s) is %d lines long, over %d: split it", what, name, lines, maxLines)
			}
		}
	}
	for _, typ := range slices.Sorted(maps.Keys(methods)) {
		if n := methods[typ]; n > maxMethods {
			t.Errorf("%s has %d methods, over %d: split it along what its methods share", typ, n, maxMethods)
		}
	}
}

// recvType is the name of a receiver's type: T of T, *T, T[X] and *T[X].
func recvType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
