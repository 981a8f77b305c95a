package wire_test

import (
	"reflect"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A job's request is stored in canonical form with its client's protocol and read back
// as it was; a format this fleet does not write is refused.
func TestStoredRequestReadsBack(t *testing.T) {
	t.Parallel()
	req, err := responses.Client.DecodeRequest([]byte(`{"model":"m","instructions":"Be brief.","input":[
		{"role":"user","content":"What is new in Go?"},
		{"type":"function_call","call_id":"c1","name":"lookup","arguments":"{\"q\":\"go\"}"},
		{"type":"function_call_output","call_id":"c1","output":"Go 1.26"}],
		"tools":[{"type":"function","name":"lookup","parameters":{"type":"object"}},{"type":"web_search","search_context_size":"high"}],
		"max_output_tokens":500,"temperature":0.2,"reasoning":{"effort":"low"},"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Notes = []string{"a note"}
	b, err := wire.EncodeStored(wire.OpenAIResponses, req)
	if err != nil {
		t.Fatal(err)
	}
	st, err := wire.DecodeStored(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Format != wire.StoredFormat || st.Protocol != wire.OpenAIResponses || !reflect.DeepEqual(st.Request, req) {
		t.Fatalf("read back %+v\nstored  %+v", st.Request, req)
	}

	for _, other := range []string{`{"format":3,"request":{}}`, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, `{"format":2}`} {
		if _, err := wire.DecodeStored([]byte(other)); err == nil {
			t.Errorf("%s reads without an error", other)
		}
	}
}
