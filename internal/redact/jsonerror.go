package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// JSONError describes a JSON decoding error to a client in JSON's own words: where the
// body is malformed, or which field has the wrong type and what it should be. The
// encoding/json texts name Go types ("cannot unmarshal string into Go struct field
// ChatRequest.messages of type []json.RawMessage"), which are the fleet's internals and
// mean nothing to a client of any language; they never reach a client.
func JSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && strings.Contains(syn.Error(), "unexpected end"):
		return "the JSON ends before it is complete"
	case errors.As(err, &syn):
		// SyntaxError's message names a character and JSON's grammar, never a Go type.
		return fmt.Sprintf("%s (at byte %d)", strings.TrimPrefix(syn.Error(), "json: "), syn.Offset)
	case errors.As(err, &typ):
		want := jsonKind(typ.Type)
		got := typ.Value
		if got == "" {
			got = "a value"
		} else {
			got = article(got)
		}
		if typ.Field == "" {
			return fmt.Sprintf("expected %s, got %s", want, got)
		}
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, want, got)
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ") // names the client's field only
	case errors.Is(err, io.ErrUnexpectedEOF), err != nil && strings.Contains(err.Error(), "unexpected end of JSON input"):
		return "the JSON ends before it is complete"
	}
	return "the body is not valid JSON"
}

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() == "RawMessage" {
			return "a JSON value"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different type"
}

func article(s string) string {
	switch s {
	case "bool":
		return "a boolean"
	case "object", "array":
		return "an " + s
	}
	return "a " + s
}
