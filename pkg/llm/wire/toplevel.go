package wire

// TopLevel is the top level of a request body the fleet sends: its own fields and the
// client's extra ones, set by name (a later set replaces an earlier one) and encoded
// by encoding/json (testdata/request_golden.json holds the bytes).
type TopLevel map[string]any

// Set gives name the value v.
func (o TopLevel) Set(name string, v any) { o[name] = v }

// SetNew gives name the value v unless it has one.
func (o TopLevel) SetNew(name string, v any) {
	if _, ok := o[name]; !ok {
		o[name] = v
	}
}

// SetSampling sets r's temperature and top_p, as every protocol but Gemini names them.
func (o TopLevel) SetSampling(r *Request) {
	if r.Temperature != nil {
		o.Set("temperature", *r.Temperature)
	}
	if r.TopP != nil {
		o.Set("top_p", *r.TopP)
	}
}

// SetToolChoice sets r's tool_choice, its mode or named(the tool's name), and its
// parallel_tool_calls, as the OpenAI protocols name them.
func (o TopLevel) SetToolChoice(r *Request, named func(string) any) {
	if tc := r.ToolChoice; tc != nil && tc.Mode == "tool" {
		o.Set("tool_choice", named(tc.Name))
	} else if tc != nil {
		o.Set("tool_choice", tc.Mode)
	}
	if r.ParallelToolCalls != nil {
		o.Set("parallel_tool_calls", *r.ParallelToolCalls)
	}
}
