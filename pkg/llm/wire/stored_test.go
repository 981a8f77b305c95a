package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// A job's request is stored in canonical form with its client's protocol and read back
// as it was; a request stored before (format 1: the Chat request with the protocol,
// search settings and notes under "searchfleet") reads into the same request, so jobs
// recorded before the upgrade run to their end.
func TestStoredRequestReadsInEitherFormat(t *testing.T) {
	t.Parallel()
	req, err := wire.Responses.DecodeRequest([]byte(`{"model":"m","instructions":"Be brief.","input":[
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

	// The same request as format 1 stored it.
	chat, err := wire.Chat.EncodeRequest(req, req.Model)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	json.Unmarshal(chat, &top)
	top[llm.FleetKey], _ = json.Marshal(map[string]any{"protocol": wire.OpenAIResponses, "search": req.Search, "notes": req.Notes})
	top["stream"] = json.RawMessage("true")
	old, _ := json.Marshal(top)
	st1, err := wire.DecodeStored(old)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Format != 1 || st1.Protocol != wire.OpenAIResponses {
		t.Fatalf("format %d protocol %q", st1.Format, st1.Protocol)
	}
	got := st1.Request
	if got.System != req.System || !reflect.DeepEqual(got.Messages, req.Messages) || !reflect.DeepEqual(got.Tools, req.Tools) ||
		got.MaxTokens != req.MaxTokens || *got.Temperature != *req.Temperature || got.Reasoning.Effort != "low" || !got.Stream ||
		got.Search == nil || got.Search.ContextSize != "high" || !reflect.DeepEqual(got.Notes, req.Notes) {
		t.Errorf("format 1 reads as %+v\nwant %+v", got, req)
	}

	if _, err := wire.DecodeStored([]byte(`{"format":3,"request":{}}`)); err == nil {
		t.Error("a format this fleet does not know reads without an error")
	}
}
