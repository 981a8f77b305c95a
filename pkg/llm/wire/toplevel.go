package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
)

// TopLevel is the top level of a request body the fleet sends: its own fields and the
// client's extra ones, set by name (a later set replaces an earlier one, as in a map)
// and written in the order of their names, which is the order encoding/json gives a
// map's keys, without a map's allocations (testdata/request_golden.json holds the
// bytes).
type TopLevel []member

type member struct {
	name  string
	value any
}

// NewTopLevel returns a topLevel with room for a request's usual fields and extra
// more.
func NewTopLevel(extra int) *TopLevel {
	o := make(TopLevel, 0, 16+extra)
	return &o
}

// Add appends a member named name, which no member has yet.
func (o *TopLevel) Add(name string, v any) {
	*o = append(*o, member{name, v})
}

// SetNew gives name the value v unless it has one.
func (o *TopLevel) SetNew(name string, v any) {
	if _, ok := o.Get(name); !ok {
		o.Add(name, v)
	}
}

// Set gives name the value v.
func (o *TopLevel) Set(name string, v any) {
	for i := range *o {
		if (*o)[i].name == name {
			(*o)[i].value = v
			return
		}
	}
	o.Add(name, v)
}

// SetSampling sets r's temperature and top_p, as every protocol but Gemini names them.
func (o *TopLevel) SetSampling(r *Request) {
	if r.Temperature != nil {
		o.Set("temperature", *r.Temperature)
	}
	if r.TopP != nil {
		o.Set("top_p", *r.TopP)
	}
}

// SetToolChoice sets r's tool_choice, its mode or named(the tool's name), and its
// parallel_tool_calls, as the OpenAI protocols name them.
func (o *TopLevel) SetToolChoice(r *Request, named func(string) any) {
	if tc := r.ToolChoice; tc != nil && tc.Mode == "tool" {
		o.Set("tool_choice", named(tc.Name))
	} else if tc != nil {
		o.Set("tool_choice", tc.Mode)
	}
	if r.ParallelToolCalls != nil {
		o.Set("parallel_tool_calls", *r.ParallelToolCalls)
	}
}

// Get returns name's value; false when it has none.
func (o *TopLevel) Get(name string) (any, bool) {
	for _, m := range *o {
		if m.name == name {
			return m.value, true
		}
	}
	return nil, false
}

// Del takes name out.
func (o *TopLevel) Del(name string) {
	*o = slices.DeleteFunc(*o, func(m member) bool { return m.name == name })
}

// bodyWriter is a buffer and an encoder writing into it, kept between requests.
type bodyWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var bodyWriters = sync.Pool{New: func() any {
	w := &bodyWriter{}
	w.enc = json.NewEncoder(&w.buf)
	return w
}}

// maxPooledBuffer is the largest buffer put back in the pool: a request carrying a
// large file would otherwise keep its memory for as long as the pool lives.
const maxPooledBuffer = 1 << 20

// Marshal encodes o as encoding/json encodes a map[string]any of the same fields:
// names sorted and escaped alike, each value encoded by encoding/json (HTML-escaped,
// a json.RawMessage compacted), so the bytes and the errors are the same.
func (o *TopLevel) Marshal() ([]byte, error) {
	slices.SortFunc(*o, func(a, b member) int { return strings.Compare(a.name, b.name) })
	w := bodyWriters.Get().(*bodyWriter)
	defer func() {
		if w.buf.Cap() <= maxPooledBuffer {
			w.buf.Reset()
			bodyWriters.Put(w)
		}
	}()
	w.buf.WriteByte('{')
	for i, m := range *o {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if err := w.name(m.name); err != nil {
			return nil, err
		}
		w.buf.WriteByte(':')
		if err := w.value(m.value); err != nil {
			return nil, err
		}
	}
	w.buf.WriteByte('}')
	return bytes.Clone(w.buf.Bytes()), nil
}

// name writes a member's name: as it is when it needs no escaping (the fleet's own
// names, and almost every client's), otherwise as encoding/json escapes a string.
func (w *bodyWriter) name(s string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return w.value(s)
		}
	}
	w.buf.WriteByte('"')
	w.buf.WriteString(s)
	w.buf.WriteByte('"')
	return nil
}

// value writes v as encoding/json does, without the newline the Encoder ends it with.
func (w *bodyWriter) value(v any) error {
	if err := w.enc.Encode(v); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1)
	return nil
}
