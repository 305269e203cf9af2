package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/termtext"
)

// The --json envelope. Every command that prints JSON prints one object on stdout: the
// command's own fields, then "error", which is null on success and {"token", "message"} on
// failure (the same token and sentence as the `mur: <token>: <sentence>` line on stderr). Lists
// are [] when empty, never null. A failed command still prints what it did before failing, so a
// script can tell which artifacts of a pull were pinned.

// jsonError is an error as JSON.
type jsonError struct {
	Token   errs.Token `json:"token"`
	Message string     `json:"message"`
}

func toJSONError(err error) *jsonError {
	if err == nil {
		return nil
	}
	var x *exitCode
	if errors.As(err, &x) {
		if x.err == nil {
			return nil // a status with nothing to say (mur outdated --exit-code): no error
		}
		err = x.err
	}
	return &jsonError{Token: errs.TokenOf(err), Message: errs.Message(err)}
}

// writeEnvelope prints result (nil, or anything that marshals to an object) with the error.
func writeEnvelope(w io.Writer, result any, err error) error {
	body := []byte("{}")
	if result != nil {
		b, merr := json.Marshal(emptyLists(reflect.ValueOf(result)).Interface())
		if merr != nil {
			return errs.Wrap(merr, errs.Internal, "encoding the JSON result: %v", merr)
		}
		if len(b) < 2 || b[0] != '{' {
			return errs.New(errs.Internal, "the JSON result of this command is not an object (%.20s…)", b)
		}
		body = b
	}
	e, merr := json.Marshal(toJSONError(err))
	if merr != nil {
		return errs.Wrap(merr, errs.Internal, "encoding the JSON error: %v", merr)
	}
	sep := ","
	if bytes.Equal(bytes.TrimSpace(body), []byte("{}")) {
		sep = ""
	}
	flat := fmt.Sprintf(`%s%s"error":%s}`, body[:len(body)-1], sep, e)
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(flat), "", "  "); err != nil {
		return errs.Wrap(err, errs.Internal, "encoding the JSON result: %v", err)
	}
	out.WriteByte('\n')
	_, werr := w.Write(termtext.JSON(out.Bytes()))
	return werr
}

var marshaler = reflect.TypeFor[json.Marshaler]()

// emptyLists returns a copy of v in which every nil slice or map is empty, so that JSON shows []
// and {} rather than null. Values that marshal themselves are left as they are.
func emptyLists(v reflect.Value) reflect.Value {
	if !v.IsValid() {
		return v
	}
	t := v.Type()
	if t.Implements(marshaler) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshaler)) {
		return v
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(emptyLists(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(t).Elem()
		out.Set(emptyLists(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(t).Elem()
		out.Set(v)
		for i := 0; i < t.NumField(); i++ {
			if f := out.Field(i); f.CanSet() {
				f.Set(emptyLists(f))
			}
		}
		return out
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return v
		}
		out := reflect.MakeSlice(t, v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(emptyLists(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(t, v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), emptyLists(it.Value()))
		}
		return out
	}
	return v
}
