package wire_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/gemini"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The model-side decoders read what a provider (or anything between it and the
// fleet) sends: any body must decode into an answer or an error, never a panic; an
// answer must render in every client protocol as valid JSON; an error body must
// become an *llm.Error. These go through the exported entry points only
// (wire.ResponsesModel, wire.AnthropicModel, wire.GeminiModel).

// modelBodySeeds are bodies no fixture covers: empty, wrong types, nulls in lists.
var modelBodySeeds = []string{``, `null`, `{}`, `[]`, `{"output":5}`, `{"output":[null]}`, `{"content":[null]}`, `{"content":"x"}`,
	`{"candidates":[null]}`, `{"candidates":[{"content":{"parts":[{"text":5}]}}]}`, `{"candidates":[{"groundingMetadata":{"groundingSupports":[{"segment":{"endIndex":99999}}]}}]}`,
	`{"output":[{"type":"message","content":[{"type":"output_text","text":"a","annotations":[{"type":"url_citation","start_index":-1,"end_index":9}]}]}]}`,
	`{"content":[{"type":"web_search_tool_result","content":{"type":"web_search_tool_result_error"}}]}`}

func fuzzModelDecoder(f *testing.F, api wire.ModelAPI, globs ...string) {
	seedGlob(f, globs...)
	for _, s := range modelBodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if e := api.DecodeError(429, body); e == nil {
			t.Fatal("DecodeError returned nil")
		}
		resp, err := api.DecodeResponse(body)
		if err != nil {
			return
		}
		resp.ID, resp.JobID, resp.Model, resp.Created, resp.Status = "job_fuzz", "job_fuzz", "m", time.Unix(1, 0), wire.StatusCompleted
		wire.ChatAnswer(resp)
		for _, c := range []wire.ClientCodec{openaichat.Client, responses.Client, anthropic.Client} {
			b, err := c.EncodeResponse(resp)
			if err != nil {
				continue
			}
			if !json.Valid(b) {
				t.Fatalf("%s: answer is not JSON: %s", c.Protocol(), b)
			}
		}
	})
}

// FuzzResponsesModelDecode: OpenAI Responses answers.
func FuzzResponsesModelDecode(f *testing.F) {
	fuzzModelDecoder(f, responses.Model, "openai/pydantic-responses-*.response.json", "openai/vercel-responses-*.json")
}

// FuzzAnthropicModelDecode: Anthropic Messages answers.
func FuzzAnthropicModelDecode(f *testing.F) {
	fuzzModelDecoder(f, anthropic.Model, "anthropic/*.response.json", "anthropic/vercel-*.json", "anthropic/docs-*.json")
}

// FuzzGeminiModelDecode: Gemini generateContent answers.
func FuzzGeminiModelDecode(f *testing.F) {
	fuzzModelDecoder(f, gemini.Model, "gemini/*.json")
}

// FuzzModelStreamDecode: any sequence of server-sent events (two here, after the
// recorded streams' first events) fed to each model protocol's stream decoder ends in
// an answer or an error, never a panic.
func FuzzModelStreamDecode(f *testing.F) {
	f.Add("message_start", []byte(`{"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":1}}}`), "content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`))
	f.Add("response.output_text.delta", []byte(`{"type":"response.output_text.delta","delta":"hi","output_index":0}`), "response.completed", []byte(`{"type":"response.completed","response":{"output":[]}}`))
	f.Add("", []byte(`{"candidates":[{"content":{"parts":[{"text":"hi"}]}}]}`), "", []byte(`{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1}}`))
	f.Add("content_block_start", []byte(`{"type":"content_block_start","index":5,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}`), "content_block_delta", []byte(`{"type":"content_block_delta","index":5,"delta":{"type":"input_json_delta","partial_json":"{\"q"}}`))
	f.Add("error", []byte(`{"type":"error","error":{"type":"overloaded_error"}}`), "", []byte(`null`))
	apis := []wire.ModelAPI{responses.Model, anthropic.Model, gemini.Model}
	f.Fuzz(func(t *testing.T, name1 string, data1 []byte, name2 string, data2 []byte) {
		for _, api := range apis {
			dec := api.NewStreamDecoder()
			if _, err := dec.Event(name1, data1); err != nil {
				continue
			}
			if _, err := dec.Event(name2, data2); err != nil {
				continue
			}
			resp, err := dec.Response()
			if err == nil && resp == nil {
				t.Fatal("no answer and no error")
			}
		}
	})
}
