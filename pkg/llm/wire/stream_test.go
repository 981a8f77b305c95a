package wire_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/searchfleet/searchfleet/pkg/llm"
	llmanthropic "github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// growing plays an answer as the ingress sees it grow: the search started, then done,
// then the text a character at a time with the citations of its markers so far. It
// returns each stage, then the final answer.
func growing(text string) ([]*wire.Response, *wire.Response) {
	srcs := []wire.Source{{URL: "https://a.example/", Title: "A"}, {URL: "https://b.example/", Title: "B"}, {URL: "https://c.example/", Title: "C"}}
	base := wire.Response{ID: "msg_job1", JobID: "msg_job1", Model: "m", Created: time.Unix(1700000000, 0), Status: wire.StatusInProgress}
	call := wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: "0_c1", Name: "web_search", Query: "weather"}}
	result := wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "0_c1", Sources: srcs}}
	textPart := func(s string) wire.Part {
		p := wire.Part{Kind: wire.PartText, Text: s}
		for _, m := range llm.CitationMarkers(s, len(srcs)) {
			p.Citations = append(p.Citations, wire.Citation{URL: srcs[m.N-1].URL, Title: srcs[m.N-1].Title, Start: m.Start, End: m.End})
		}
		return p
	}
	stage := func(parts ...wire.Part) *wire.Response {
		r := base
		r.Content = parts
		return &r
	}
	stages := []*wire.Response{stage(call), stage(call, result)}
	runes := []rune(text)
	for i := 1; i <= len(runes); i++ {
		stages = append(stages, stage(call, result, textPart(string(runes[:i]))))
	}
	final := stage(call, result, textPart(text))
	final.Status, final.Stop, final.Usage = wire.StatusCompleted, wire.StopEndTurn, wire.Usage{InputTokens: 10, OutputTokens: 20, WebSearches: 1}
	return stages, final
}

// The text of every case ends in a different state: plain text, a cited group, a
// marker still being written, an invalid marker.
var liveTexts = []string{
	"Paris is sunny [1][2] today. Rain [3] tomorrow, [9] maybe; 日本 [1]. Done.",
	"Sunny [1]",
	"Sunny [2] and [1][3]",
	"Half [1",
	"No citations at all, 東京.",
}

// Streamed one character at a time, the Anthropic stream sends text and citations as
// they are written (not all at the end), and anthropic-sdk-go's accumulator rebuilds
// the non-streamed message block for block, citations included.
func TestAnthropicStreamGrowsToTheAnswer(t *testing.T) {
	t.Parallel()
	for _, text := range liveTexts {
		stages, final := growing(text)
		st := llmanthropic.Client.NewStream()
		evs := st.Start(stages[0])
		for _, s := range stages {
			evs = append(evs, st.Update(s)...)
		}
		live := len(evs)
		evs = append(evs, st.Finish(final)...)
		var acc anthropic.Message
		liveText, liveCites := 0, 0
		for i, e := range evs {
			var u anthropic.MessageStreamEventUnion
			if err := json.Unmarshal(e.Data, &u); err != nil {
				t.Fatal(err)
			}
			if err := acc.Accumulate(u); err != nil {
				t.Fatalf("%q: event %d %s: %v", text, i, e.Data, err)
			}
			if i < live && u.Type == "content_block_delta" {
				switch u.Delta.Type {
				case "text_delta":
					liveText += len(u.Delta.Text)
				case "citations_delta":
					liveCites++
				}
			}
		}
		b, _ := llmanthropic.Client.EncodeResponse(final)
		var want anthropic.Message
		json.Unmarshal(b, &want)
		if len(acc.Content) != len(want.Content) {
			t.Fatalf("%q: %d blocks, want %d: %s", text, len(acc.Content), len(want.Content), b)
		}
		for i := range want.Content {
			g, w := acc.Content[i], want.Content[i]
			if g.Type != w.Type || g.Text != w.Text || len(g.Citations) != len(w.Citations) {
				t.Fatalf("%q block %d: %s, want %s", text, i, g.RawJSON(), w.RawJSON())
			}
			for j := range w.Citations {
				if g.Citations[j].URL != w.Citations[j].URL || g.Citations[j].CitedText != w.Citations[j].CitedText {
					t.Errorf("%q block %d citation %d: %s, want %s", text, i, j, g.Citations[j].RawJSON(), w.Citations[j].RawJSON())
				}
			}
		}
		// Everything but what may still become a marker streams before the end.
		if held := len(text) - liveText; held > len("[1") {
			t.Errorf("%q: %d bytes held back to the end", text, held)
		}
		if n := len(llm.CitationMarkers(text, 3)); n > 0 && liveCites == 0 {
			t.Errorf("%q: no citation streamed before the end", text)
		}
	}
}

// The Chat and Responses streams send the text as it grows, and their deltas add up
// to the answer's text.
func TestOpenAIStreamsGrowToTheAnswer(t *testing.T) {
	t.Parallel()
	for _, text := range liveTexts {
		stages, final := growing(text)
		for _, c := range []wire.ClientCodec{openaichat.Client, responses.Client} {
			st := c.NewStream()
			evs := st.Start(stages[0])
			for _, s := range stages {
				evs = append(evs, st.Update(s)...)
			}
			live := len(evs)
			evs = append(evs, st.Finish(final)...)
			var got strings.Builder
			liveText := 0
			for i, e := range evs {
				var d struct {
					Type    string `json:"type"`
					Delta   string `json:"delta"`
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				json.Unmarshal(e.Data, &d)
				piece := d.Delta
				if d.Type != "response.output_text.delta" {
					piece = ""
				}
				if len(d.Choices) > 0 {
					piece = d.Choices[0].Delta.Content
				}
				got.WriteString(piece)
				if i < live {
					liveText += len(piece)
				}
			}
			if got.String() != text || liveText != len(text) {
				t.Errorf("%s %q: deltas %q, %d bytes live", c.Protocol(), text, got.String(), liveText)
			}
		}
	}
}

// A Chat stream shows search progress as SSE comment lines only (never as data the
// SDKs parse): searching, then completed with the number of sources or failed with
// the error code.
func TestChatStreamSearchProgressComments(t *testing.T) {
	t.Parallel()
	base := &wire.Response{ID: "chatcmpl-job1", Model: "m", Created: time.Unix(1700000000, 0)}
	call := func(id string) wire.Part {
		return wire.Part{Kind: wire.PartServerCall, Server: &wire.ServerCall{ID: id, Name: "web_search", Query: "q " + id}}
	}
	ok := wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "0_a", Sources: []wire.Source{{URL: "https://a.example/"}, {URL: "https://b.example/"}}}}
	bad := wire.Part{Kind: wire.PartServerResult, Search: &wire.SearchResult{CallID: "0_b", Error: &wire.SearchError{Code: "unavailable"}}}
	st := openaichat.Client.NewStream()
	evs := st.Start(base)
	for _, parts := range [][]wire.Part{{call("0_a")}, {call("0_a"), call("0_b")}, {call("0_a"), ok, call("0_b"), bad}} {
		r := *base
		r.Content = parts
		evs = append(evs, st.Update(&r)...)
	}
	var comments []string
	for _, e := range evs {
		if e.Data != nil {
			t.Errorf("search progress as data: %s", e.Data)
		}
		comments = append(comments, e.Comment)
	}
	want := []string{
		`web_search {"id":"0_a","query":"q 0_a","status":"searching"}`,
		`web_search {"id":"0_b","query":"q 0_b","status":"searching"}`,
		`web_search {"id":"0_a","sources":2,"status":"completed"}`,
		`web_search {"error":"unavailable","id":"0_b","status":"failed"}`,
	}
	if strings.Join(comments, "\n") != strings.Join(want, "\n") {
		t.Errorf("comments:\n%s\nwant:\n%s", strings.Join(comments, "\n"), strings.Join(want, "\n"))
	}
	var b strings.Builder
	wire.WriteSSE(&b, evs[:1])
	if b.String() != ": "+want[0]+"\n\n" {
		t.Errorf("framed as %q", b.String())
	}
}
