package jsonfast_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/jsonfast"
)

// target is a struct with the shapes the fleet decodes: nested structs, pointers,
// slices, maps, raw messages, times, an interface and a ",string" number.
type target struct {
	Title   string            `json:"title"`
	N       int               `json:"n"`
	F       float64           `json:"f"`
	OK      bool              `json:"ok"`
	P       *inner            `json:"p"`
	List    []inner           `json:"list"`
	Tags    map[string]string `json:"tags"`
	Raw     json.RawMessage   `json:"raw"`
	At      time.Time         `json:"at"`
	Any     any               `json:"any"`
	Quoted  int64             `json:"quoted,string"`
	Default string            `json:"default"`
	inner
}

type inner struct {
	URL  string `json:"url"`
	Rank uint8  `json:"rank"`
}

// TestUnmarshalMatchesEncodingJSON decodes documents that probe v1's semantics (case,
// invalid UTF-8, duplicates, null, embedding, errors of every kind) with both decoders
// into values that start the same, and wants the same value and the same error, in
// type and in words.
func TestUnmarshalMatchesEncodingJSON(t *testing.T) {
	docs := map[string]string{
		"plain":             `{"title":"Go","n":3,"f":1.5,"ok":true,"p":{"url":"u","rank":2},"list":[{"url":"a"},{"url":"b"}],"tags":{"k":"v"},"raw":{"x":[1, 2]},"at":"2026-11-28T15:00:00Z","any":{"a":[1,"s",null]},"quoted":"42","url":"top","rank":9}`,
		"case-insensitive":  `{"TITLE":"Go","Url":"u","List":[{"URL":"a"}]}`,
		"exact-name-wins":   `{"Title":"folded","title":"exact"}`,
		"duplicate-names":   `{"title":"a","title":"b","n":1,"n":2}`,
		"invalid-utf8":      "{\"title\":\"a\xffb\xc3\",\"tags\":{\"k\xfe\":\"v\xed\xa0\x80\"}}",
		"lone-surrogate":    `{"title":"\ud800x","any":"\udc00"}`,
		"escapes":           `{"title":"\u00e9\n\t\"\\\/\u2028"}`,
		"null-everywhere":   `{"title":null,"n":null,"p":null,"list":null,"tags":null,"raw":null,"at":null,"any":null,"default":null}`,
		"unknown-fields":    `{"nope":{"deep":[1,2,{"x":null}]},"title":"t"}`,
		"big-numbers":       `{"n":12345678901234567,"f":1e308,"any":1e400}`,
		"whitespace":        " \n\t{ \"title\" : \"t\" } \r\n",
		"empty-object":      `{}`,
		"top-null":          `null`,
		"syntax-error":      `{"title":"t",}`,
		"truncated":         `{"title":"t"`,
		"empty":             ``,
		"trailing-data":     `{"title":"t"} x`,
		"two-values":        `{} {}`,
		"bad-literal":       `{"ok":tru}`,
		"type-string-int":   `{"n":"3","title":"still set"}`,
		"type-nested":       `{"list":[{"rank":300}],"title":"t"}`,
		"type-negative":     `{"p":{"rank":-1}}`,
		"type-array-object": `{"tags":[1]}`,
		"type-float-int":    `{"n":1.5}`,
		"bad-time":          `{"at":"yesterday"}`,
		"bad-quoted":        `{"quoted":42}`,
		"not-object":        `[1,2]`,
		"control-char":      "{\"title\":\"a\x01b\"}",
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			want := target{Default: "kept"}
			wantErr := json.Unmarshal([]byte(doc), &want)
			got := target{Default: "kept"}
			gotErr := jsonfast.Unmarshal([]byte(doc), &got)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Fatalf("error %v, encoding/json says %v", gotErr, wantErr)
			}
			if wantErr != nil && reflect.TypeOf(wantErr) != reflect.TypeOf(gotErr) {
				t.Fatalf("error of type %T, encoding/json gives %T", gotErr, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n%#v\nencoding/json decodes\n%#v", got, want)
			}
		})
	}
}

// TestUnmarshalErrorTypes keeps the error types callers test for with errors.As.
func TestUnmarshalErrorTypes(t *testing.T) {
	var v struct {
		N int `json:"n"`
	}
	var syn, stdSyn *json.SyntaxError
	err := jsonfast.Unmarshal([]byte(`{"n":}`), &v)
	if !errors.As(json.Unmarshal([]byte(`{"n":}`), &v), &stdSyn) || !errors.As(err, &syn) || syn.Offset != stdSyn.Offset {
		t.Fatalf("syntax error: %v (%T), encoding/json says %v", err, err, stdSyn)
	}
	var typ *json.UnmarshalTypeError
	if err := jsonfast.Unmarshal([]byte(`{"n":"x"}`), &v); !errors.As(err, &typ) || typ.Field != "n" {
		t.Fatalf("type error: %v (%T)", err, err)
	}
	var inv *json.InvalidUnmarshalError
	var nilTarget *target
	if err := jsonfast.Unmarshal([]byte(`{}`), nilTarget); !errors.As(err, &inv) {
		t.Fatalf("nil target: %v (%T)", err, err)
	}
}
