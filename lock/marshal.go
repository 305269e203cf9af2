package lock

import (
	"bytes"
	"errors"
	"sort"
	"strconv"
	"strings"
)

// Marshal writes the lock in its canonical form. It does not change l.
//
// It writes the text itself rather than through a YAML encoder: the shape is fixed, every value
// is a short token, and a hand-written emitter is an order of magnitude faster on large locks.
func (l *Lock) Marshal() []byte {
	var b bytes.Buffer
	b.Grow(64 + 120*len(l.Scopes) + 220*len(l.Artifacts))
	b.WriteString("lock_version: ")
	b.WriteString(strconv.Itoa(Version))
	b.WriteString("\nscopes:")
	if len(l.Scopes) == 0 {
		b.WriteString(" {}")
	}
	b.WriteByte('\n')
	for _, name := range sortedKeys(l.Scopes) {
		p := l.Scopes[name]
		b.WriteString("  ")
		scalar(&b, name)
		b.WriteString(":\n    source: ")
		scalar(&b, p.Source)
		b.WriteString("\n    owner_id: ")
		b.WriteString(strconv.FormatInt(p.OwnerID, 10))
		b.WriteString("\n    repo_id: ")
		b.WriteString(strconv.FormatInt(p.RepoID, 10))
		b.WriteByte('\n')
	}
	b.WriteString("artifacts:")
	if len(l.Artifacts) == 0 {
		b.WriteString(" []")
	}
	b.WriteByte('\n')
	order := make([]int, len(l.Artifacts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := &l.Artifacts[order[i]], &l.Artifacts[order[j]]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ResolvedVersion < b.ResolvedVersion
	})
	for _, i := range order {
		e := &l.Artifacts[i]
		b.WriteString("  - name: ")
		scalar(&b, e.Name)
		b.WriteString("\n    resolved_version: ")
		scalar(&b, e.ResolvedVersion)
		b.WriteString("\n    sha256:\n")
		if e.SHA256.Any != "" || len(e.SHA256.Platforms) == 0 {
			b.WriteString("      any: ")
			scalar(&b, e.SHA256.Any)
			b.WriteByte('\n')
		} else {
			b.WriteString("      platforms:\n")
			for _, p := range sortedKeys(e.SHA256.Platforms) {
				b.WriteString("        ")
				scalar(&b, p)
				b.WriteString(": ")
				scalar(&b, e.SHA256.Platforms[p])
				b.WriteByte('\n')
			}
		}
		origin := e.Origin
		if origin == "" {
			origin = OriginOperator
		}
		b.WriteString("    origin: ")
		scalar(&b, string(origin))
		b.WriteByte('\n')
		if pr := e.Provenance; pr != nil {
			b.WriteString("    provenance:\n      kind: ")
			scalar(&b, pr.Kind)
			b.WriteString("\n      bundle: ")
			scalar(&b, pr.Bundle)
			b.WriteString("\n      signer: ")
			scalar(&b, pr.Signer)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// scalar writes v plain when every YAML reader takes it for that very string, and double-quoted
// otherwise: when it could be read as a number, a boolean (YAML 1.1's yes/no/on/off included) or
// null, or holds anything outside the few characters that names, versions, hashes and sources use.
func scalar(b *bytes.Buffer, v string) {
	if plainSafe(v) {
		b.WriteString(v)
		return
	}
	// Go's escapes (\n, \t, \", \\, \xNN, \uNNNN, \UNNNNNNNN) are all valid in YAML's double-quoted
	// style, and ASCII-only output keeps the file free of look-alike characters.
	b.WriteString(strconv.QuoteToASCII(v))
}

func plainSafe(v string) bool {
	if v == "" {
		return false
	}
	c := v[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '/') {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '+', c == '-', c == '/':
		case c == ':' && i < len(v)-1 && !(v[0] >= '0' && v[0] <= '9'):
			// "a:b" is plain; a trailing ':' would start a mapping, and YAML 1.1 reads "1:20"
			// as a base-60 number.
		default:
			return false
		}
	}
	switch strings.ToLower(v) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		return false
	}
	return !looksNumeric(v)
}

// looksNumeric reports whether a YAML 1.1 or 1.2 reader could take v for an int or a float,
// including 0x/0o/0b forms, YAML 1.1's '_' separators and leading-zero octals. It errs toward
// yes: quoting a string that needed none costs nothing.
func looksNumeric(v string) bool {
	// Most values (names, hashes, versions like 1.2.0) are ruled out by a scan, without the
	// allocation of a failed strconv parse.
	body := strings.TrimLeft(v, "+-")
	if body == "" {
		return false
	}
	if c := body[0]; c >= '1' && c <= '9' || c == '.' {
		dots := 0
		for i := 0; i < len(body); i++ {
			switch c := body[i]; {
			case c >= '0' && c <= '9', c == '_', c == 'e', c == 'E', c == '+', c == '-':
			case c == '.':
				dots++
			default:
				return false
			}
		}
		if dots > 1 {
			return false
		}
	}
	s := strings.ReplaceAll(v, "_", "")
	if _, err := strconv.ParseInt(s, 0, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return true
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return true
	}
	return false
}
