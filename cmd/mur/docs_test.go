package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/murmur-nexus/mur/internal/errs"
)

// The user's manual lives in README.md and docs/. These tests keep it true to the code: the help
// topics and the docs pages show the same text, and every exit status, token, environment
// variable, config.yaml key and --json field the code has is documented.

// repoRoot is the repository's root folder, seen from cmd/mur.
var repoRoot = filepath.Join("..", "..")

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// helpBlock finds, in a docs page, the fenced block under the marker of `mur help NAME`: the
// marker line, then a ```text fence, the help text, and the closing fence.
var helpBlock = regexp.MustCompile("(?s)(<!-- mur help ([a-z-]+)[^\n]*-->\n```text\n)(.*?)(```\n)")

// Each help topic's text is what docs/TOPIC.md shows under its marker. With -update the pages
// are rewritten from the help topics (the Go tables are the source).
func TestDocsShowHelpTopics(t *testing.T) {
	t.Parallel()
	for _, topic := range helpTopics() {
		rel := "docs/" + topic.name + ".md"
		page := readDoc(t, rel)
		want := topic.text()
		found := false
		got := helpBlock.ReplaceAllStringFunc(page, func(m string) string {
			sub := helpBlock.FindStringSubmatch(m)
			if sub[2] != topic.name {
				return m
			}
			found = true
			if sub[3] != want && !*update {
				t.Errorf("%s shows another text than 'mur help %s'; run go test ./cmd/mur -run TestDocsShowHelpTopics -update\n--- the page:\n%s\n--- mur help %s:\n%s", rel, topic.name, sub[3], topic.name, want)
			}
			return sub[1] + want + sub[4]
		})
		if !found {
			t.Errorf("%s has no <!-- mur help %s --> block followed by a ```text fence", rel, topic.name)
			continue
		}
		if *update && got != page {
			if err := os.WriteFile(filepath.Join(repoRoot, filepath.FromSlash(rel)), []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// `mur help TOPIC` prints the topic, and an unknown topic is a usage error with a suggestion.
func TestHelpTopicsRun(t *testing.T) {
	t.Parallel()
	for _, topic := range helpTopics() {
		code, out, errOut := runMur(t, "help", topic.name)
		if code != 0 || out != topic.text() || errOut != "" {
			t.Errorf("mur help %s: exit %d, stderr %q", topic.name, code, errOut)
		}
	}
	code, out, _ := runMur(t, "help")
	for _, topic := range helpTopics() {
		if code != 0 || !strings.Contains(out, "\n  "+topic.name+" ") {
			t.Errorf("mur help does not list the topic %s:\n%s", topic.name, out)
		}
	}
	if code, _, errOut := runMur(t, "help", "exit-code"); code != 2 || !strings.Contains(errOut, "did you mean 'mur help exit-codes'?") {
		t.Errorf("mur help exit-code: exit %d, %s", code, errOut)
	}
	for _, line := range strings.Split(exitCodesHelp()+tokensHelp()+environmentHelp(), "\n") {
		if len([]rune(line)) > helpWidth {
			t.Errorf("a help topic's line is over %d columns: %q", helpWidth, line)
		}
	}
}

// sourceConsts reads the string constants of every Go file under root, by package name and by
// folder, so that os.Getenv(artifact.EnvMaxDecompressed) can be read as the name it is.
type sourceConsts struct {
	byDir map[string]map[string]string // folder -> name -> value
	byPkg map[string]map[string]string // package name -> name -> value
}

func (c *sourceConsts) add(dir, pkg string, f *ast.File) {
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, name := range v.Names {
				if i >= len(v.Values) {
					continue
				}
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				val, _ := strconv.Unquote(lit.Value)
				if c.byDir[dir] == nil {
					c.byDir[dir] = map[string]string{}
				}
				if c.byPkg[pkg] == nil {
					c.byPkg[pkg] = map[string]string{}
				}
				c.byDir[dir][name.Name] = val
				c.byPkg[pkg][name.Name] = val
			}
		}
	}
}

// goFile is one parsed Go file of the repository.
type goFile struct {
	path string // relative to the repository root, with slashes
	dir  string
	file *ast.File
}

func parseRepo(t *testing.T) ([]goFile, *sourceConsts) {
	t.Helper()
	consts := &sourceConsts{byDir: map[string]map[string]string{}, byPkg: map[string]map[string]string{}}
	var files []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		files = append(files, goFile{path: rel, dir: filepath.ToSlash(filepath.Dir(rel)), file: f})
		consts.add(filepath.ToSlash(filepath.Dir(rel)), f.Name.Name, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, consts
}

// envReads are the environment variables a file reads by name: os.Getenv and os.LookupEnv of a
// string, or of a constant the repository declares.
func envReads(t *testing.T, f goFile, consts *sourceConsts) []string {
	var out []string
	ast.Inspect(f.file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "os" {
			return true
		}
		switch a := call.Args[0].(type) {
		case *ast.BasicLit:
			v, _ := strconv.Unquote(a.Value)
			out = append(out, v)
		case *ast.Ident:
			v, ok := consts.byDir[f.dir][a.Name]
			if !ok {
				t.Errorf("%s reads the environment variable named by %s, which this test can't resolve; name it with a string constant", f.path, a.Name)
			}
			out = append(out, v)
		case *ast.SelectorExpr:
			pkg, _ := a.X.(*ast.Ident)
			v, ok := "", false
			if pkg != nil {
				v, ok = consts.byPkg[pkg.Name][a.Sel.Name]
			}
			if !ok {
				t.Errorf("%s reads an environment variable this test can't resolve; name it with a string constant", f.path)
			}
			out = append(out, v)
		default:
			t.Errorf("%s reads an environment variable named by an expression; name it with a string constant", f.path)
		}
		return true
	})
	return out
}

// linkedDirs are the repository's folders whose packages mur or mur-provenance link.
func linkedDirs(t *testing.T) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./cmd/mur", "./cmd/mur-provenance")
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/murmur-nexus/mur"
	dirs := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, module+"/"); ok {
			dirs[rest] = true
		}
	}
	if !dirs["cmd/mur"] || !dirs["internal/errs"] {
		t.Fatalf("go list found no mur packages:\n%s", out)
	}
	return dirs
}

// Every environment variable that mur or mur-provenance reads by name is in 'mur help
// environment' (and so in docs/environment.md); every other one the repository reads (tests,
// test helpers, benchreport) is named somewhere in docs/, for contributors.
func TestEnvironmentCoversTheCode(t *testing.T) {
	t.Parallel()
	files, consts := parseRepo(t)
	linked := linkedDirs(t)
	documented := map[string]bool{}
	for _, d := range environment() {
		documented[d.name] = true
	}
	docs := allDocs(t)
	found := 0
	for _, f := range files {
		for _, name := range envReads(t, f, consts) {
			found++
			if linked[f.dir] && !strings.HasSuffix(f.path, "_test.go") {
				if !documented[name] {
					t.Errorf("%s reads %s, which 'mur help environment' does not list; add it to environment() in help_topics.go, then run go test ./cmd/mur -run TestDocsShowHelpTopics -update", f.path, name)
				}
				continue
			}
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(docs) {
				t.Errorf("%s reads %s, which no page of docs/ names; say what it is for in docs/ARCHITECTURE.md", f.path, name)
			}
		}
	}
	if found < 10 {
		t.Fatalf("found only %d reads of the environment; is the repository where this test looks (%s)?", found, repoRoot)
	}
}

// allDocs is README.md and every page of docs/, as one text.
func allDocs(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(readDoc(t, "README.md"))
	pages, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// configKeys reads the keys of config.yaml from the source of its parser (fetch/config, and the
// store entries and trusted keys it hands to fetch/store and fetch/provenance): the cases of a
// switch on a key node's Value, a comparison of one with a string, and yaml struct tags.
func configKeys(t *testing.T) []string {
	t.Helper()
	isKeyValue := func(e ast.Expr) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Value" {
			return false
		}
		id, ok := sel.X.(*ast.Ident)
		return ok && strings.HasSuffix(id.Name, "k") && len(id.Name) <= 3
	}
	keys := map[string]bool{}
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			v, _ := strconv.Unquote(b.Value)
			keys[v] = true
		}
	}
	tag := regexp.MustCompile(`yaml:"([a-z_]+)`)
	fset := token.NewFileSet()
	for _, glob := range []string{"fetch/config/*.go", "fetch/store/*.go", "fetch/provenance/*.go"} {
		paths, _ := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(glob)))
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SwitchStmt:
					if n.Tag != nil && isKeyValue(n.Tag) {
						for _, s := range n.Body.List {
							for _, e := range s.(*ast.CaseClause).List {
								lit(e)
							}
						}
					}
				case *ast.BinaryExpr:
					if (n.Op == token.EQL || n.Op == token.NEQ) && isKeyValue(n.X) {
						lit(n.Y)
					}
				case *ast.CallExpr:
					// f.sizeKey(path, PARENT, KEY, …) reads PARENT: { KEY: SIZE }.
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "sizeKey" && len(n.Args) > 2 {
						lit(n.Args[1])
						lit(n.Args[2])
					}
				case *ast.Field:
					if n.Tag != nil {
						for _, m := range tag.FindAllStringSubmatch(n.Tag.Value, -1) {
							keys[m[1]] = true
						}
					}
				}
				return true
			})
		}
	}
	var out []string
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Every key the config.yaml parser reads is in docs/config.md.
func TestConfigKeysDocumented(t *testing.T) {
	t.Parallel()
	keys := configKeys(t)
	// The keys of today; if the parser's shape changes so that this test no longer finds them,
	// teach configKeys the new shape rather than dropping one from here.
	for _, k := range []string{"stores", "sources", "cache", "max_size", "pull", "max_decompressed", "mirror", "mirror_required", "provenance",
		"trusted_root", "trusted_keys", "scopes", "allow_self_hosted", "signer_workflow", "url", "plain_http", "fallback", "hint", "pem", "pem_file"} {
		if !slices.Contains(keys, k) {
			t.Errorf("configKeys did not find the key %q in fetch/config's source; it found %q", k, keys)
		}
	}
	page := readDoc(t, "docs/config.md")
	for _, k := range keys {
		if !regexp.MustCompile("`[^`\n]*\\b" + regexp.QuoteMeta(k) + "\\b[^`\n]*`").MatchString(page) {
			t.Errorf("docs/config.md does not document the config.yaml key %q (in `code`)", k)
		}
	}
}

// Every field of every --json golden is in docs/json.md, in `code`.
func TestJSONFieldsDocumented(t *testing.T) {
	t.Parallel()
	page := readDoc(t, "docs/json.md")
	goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if len(goldens) == 0 {
		t.Fatal("no goldens in testdata/golden")
	}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		for _, k := range jsonKeys(v) {
			if !strings.Contains(page, "`"+k+"`") {
				t.Errorf("docs/json.md does not name the field `%s` of %s", k, filepath.Base(g))
			}
		}
	}
}

func jsonKeys(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out = append(out, k)
			out = append(out, jsonKeys(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, jsonKeys(x)...)
		}
	}
	return out
}

// Every exit status the code exits with is in 'mur help exit-codes': exitStatus's for every
// token, and each of sandbox's Status constants for mur run.
func TestExitCodesCoverTheCode(t *testing.T) {
	t.Parallel()
	all := map[int]bool{}
	for _, d := range exitCodes() {
		all[d.code] = true
	}
	for _, d := range errs.Docs {
		if s := exitStatus(d.Token); !all[s] {
			t.Errorf("a %s error exits %d, which 'mur help exit-codes' does not list", d.Token, s)
		}
	}
	runCodes := map[int]bool{}
	for _, d := range runExitCodes() {
		runCodes[d.code] = true
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(repoRoot, "sandbox", "runner.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		v, ok := node.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range v.Names {
			if !strings.HasPrefix(name.Name, "Status") || i >= len(v.Values) {
				continue
			}
			lit, ok := v.Values[i].(*ast.BasicLit)
			if !ok || lit.Kind != token.INT {
				continue
			}
			code, _ := strconv.Atoi(lit.Value)
			n++
			if !runCodes[code] {
				t.Errorf("sandbox.%s is %d, which 'mur help exit-codes' does not list under mur run", name.Name, code)
			}
		}
		return true
	})
	if n == 0 {
		t.Fatal("found no Status constants in sandbox/runner.go")
	}
}

// mdLink is a Markdown link to a file of the repository, with an optional #anchor.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link in README.md and docs/ leads to a file that exists, and an #anchor to a
// heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	pages := []string{"README.md"}
	found, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	for _, p := range found {
		pages = append(pages, "docs/"+filepath.Base(p))
	}
	for _, page := range pages {
		text := readDoc(t, page)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			rel := page
			if file != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(rel))); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(rel, ".md") && !slices.Contains(anchors(readDoc(t, rel)), anchor) {
				t.Errorf("%s links to %s, and %s has no heading with that anchor (it has %q)", page, target, rel, anchors(readDoc(t, rel)))
			}
		}
	}
}

// anchors are the anchors GitHub gives the headings of a Markdown text.
func anchors(text string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// heredoc is a file the README writes with cat > PATH <<'YAML' … YAML.
var heredoc = regexp.MustCompile(`(?s)cat > (\S+) <<'YAML'\n(.*?)\nYAML\n`)

// The README's first project writes the same files as first-project.txtar, the script test that
// plays its steps, so that what a reader copies is what the test runs.
func TestReadmeFirstProjectIsTheScript(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	ar, err := txtar.ParseFile(filepath.Join("testdata", "script", "first-project.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range ar.Files {
		files[f.Name] = string(f.Data)
	}
	// The README writes notes/ from ~/murmur-start, and the rest from ~/murmur-start/hello.
	where := map[string]string{"notes/murmur.yaml": "notes/murmur.yaml", "murmur.yaml": "hello/murmur.yaml", ".murmur/config.yaml": "hello/.murmur/config.yaml"}
	seen := 0
	for _, m := range heredoc.FindAllStringSubmatch(readme, -1) {
		name, ok := where[m[1]]
		if !ok {
			continue
		}
		seen++
		if want := files[name]; m[2]+"\n" != want {
			t.Errorf("README writes %s as\n%s\nand first-project.txtar's %s is\n%s", m[1], m[2], name, want)
		}
	}
	if seen != len(where) {
		t.Errorf("README writes %d of the first project's %d files with cat > FILE <<'YAML'", seen, len(where))
	}
	if !strings.Contains(readme, "GOOS=wasip1 GOARCH=wasm go build -C /path/to/mur -trimpath ") {
		t.Error("README's first project does not build the tool with -trimpath (two publishers would get different digests)")
	}
}
