package wire_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// twoPassDecode is how a Chat model's answer was read before it was read in one
// pass: the in-band error envelope alone, then the completion.
func twoPassDecode(body []byte) (*wire.Response, error) {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		if le := llm.InBandError(e.Error); le != nil {
			return nil, le
		}
	}
	return openaichat.Client.DecodeResponse(body)
}

// A Chat model's answer read in one pass is what the two passes read: the answer,
// an in-band error (also next to fields of the wrong type), or a decoding error.
func TestChatModelDecodeOnePass(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		thinkingAnswer,
		`{"id":"c2","model":"m","created":1700000000,"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"Go 1.26 shipped [1].","annotations":[{"type":"url_citation","url_citation":{"url":"https://go.dev","title":"Go","start_index":0,"end_index":5}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		`{"error":{"message":"Provider returned error","code":429}}`,
		`{"choices":5,"error":{"message":"overloaded","code":503}}`,
		`{"error":{"message":"late"},"choices":[{"message":{"content":"x"}}]}`,
		`{"error":null,"choices":[{"message":{"content":"x"}}]}`,
		`{"choices":[]}`,
		`{"choices":"no"}`,
		`[1,2]`,
		`"text"`,
		`{"choices":[`,
		``,
	} {
		want, wantErr := twoPassDecode([]byte(body))
		got, gotErr := openaichat.Model.DecodeResponse([]byte(body))
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Errorf("%s:\n got %+v, %v\nwant %+v, %v", body, got, gotErr, want, wantErr)
		}
	}
}

// BenchmarkChatModelDecodeResponse reads a Chat model's tool-call answer.
func BenchmarkChatModelDecodeResponse(b *testing.B) {
	body := []byte(thinkingAnswer)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openaichat.Model.DecodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatModelDecodeTwoPass is the same answer read as it was before.
func BenchmarkChatModelDecodeTwoPass(b *testing.B) {
	body := []byte(thinkingAnswer)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := twoPassDecode(body); err != nil {
			b.Fatal(err)
		}
	}
}
