package yamlnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Problem is why bytes are not one YAML document.
type Problem int

const (
	NotUTF8        Problem = iota + 1 // a byte that is not UTF-8
	NotYAML                           // the parser refused it, or failed on it
	SecondDocument                    // more than one document
)

// DecodeError says why Decode refused data. Each parser words it with its own file, token and
// next step; Error is a sentence they can use as it is.
type DecodeError struct {
	Problem Problem
	Line    int   // 1-based; 0 when the parser did not say
	Err     error // the parser's own error, for NotYAML
}

func (e *DecodeError) Error() string {
	switch e.Problem {
	case NotUTF8:
		return fmt.Sprintf("line %d: the file is not UTF-8 from this line on; save it as UTF-8", e.Line)
	case SecondDocument:
		return fmt.Sprintf("line %d: a second YAML document starts here; keep a single one", e.Line)
	}
	return fmt.Sprintf("not valid YAML: %v", e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decode is the one way mur reads a YAML file: it returns the root node of data's single
// document, or nil when data holds none (it is empty, or only comments). Hostile input is
// refused, never followed: bytes that are not UTF-8, a panic inside the parser (turned into an
// error; the process must not go down), and a second document, which a reader that kept only
// the first would silently ignore.
func Decode(data []byte) (*yaml.Node, error) {
	doc, err := DecodeDocument(data)
	if doc == nil || err != nil {
		return nil, err
	}
	if len(doc.Content) == 1 {
		return doc.Content[0], nil
	}
	return doc, nil
}

// DecodeDocument is Decode for a caller that writes the file back: it returns the document node
// itself, which holds the file's leading and trailing comments.
func DecodeDocument(data []byte) (doc *yaml.Node, err error) {
	if !utf8.Valid(data) {
		return nil, &DecodeError{Problem: NotUTF8, Line: firstInvalidLine(data)}
	}
	defer func() {
		if r := recover(); r != nil {
			doc, err = nil, &DecodeError{Problem: NotYAML, Err: fmt.Errorf("the YAML parser failed: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var d yaml.Node
	if err := dec.Decode(&d); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, &DecodeError{Problem: NotYAML, Err: err}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &DecodeError{Problem: SecondDocument, Line: max(extra.Line, 1)}
	}
	return &d, nil
}

// firstInvalidLine is the line of the first byte that is not UTF-8.
func firstInvalidLine(data []byte) int {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		}
		i += size
	}
	return line
}
