package errs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// declaredTokens reads the Token constants from errs.go's source, so that a token added there and
// nowhere else is still found.
func declaredTokens(t *testing.T) []Token {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errs.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Token
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Token" {
				continue
			}
			for _, val := range v.Values {
				lit, ok := val.(*ast.BasicLit)
				if !ok {
					t.Fatalf("a Token constant is not a string literal: %#v", val)
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, Token(s))
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Token constants found in errs.go")
	}
	return out
}

// Every token has one entry in Docs, in the constants' order, with a sentence.
func TestDocsCoverEveryToken(t *testing.T) {
	t.Parallel()
	declared := declaredTokens(t)
	if len(Docs) != len(declared) {
		t.Errorf("Docs has %d entries, errs.go declares %d tokens", len(Docs), len(declared))
	}
	for i, tok := range declared {
		if i >= len(Docs) || Docs[i].Token != tok {
			t.Errorf("Docs[%d] should document %q, in the order errs.go declares the tokens", i, tok)
			continue
		}
		if len(Docs[i].Meaning) < 20 {
			t.Errorf("Docs[%d] (%s) says too little: %q", i, tok, Docs[i].Meaning)
		}
	}
}

// docs/tokens.md names every token at the start of a line of its table (the `mur help tokens`
// block that cmd/mur's tests keep equal to the command's output).
func TestTokensPageNamesEveryToken(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "tokens.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range declaredTokens(t) {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(string(tok)) + `\s`).Match(page) {
			t.Errorf("docs/tokens.md does not document the token %q; run go test ./cmd/mur -run TestDocsShowHelpTopics -update", tok)
		}
	}
}
