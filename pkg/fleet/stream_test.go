package fleet_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"

	llmanthropic "github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
)

// slowSearch searches, then answers a token every 20 ms: long enough that the job is
// still running when the first token reaches the client.
const slowSearch = searchPrompt + " sim:token-delay=20ms"

// storedJob reads a job record (GET /v1/jobs/{id}).
func storedJob(t *testing.T, f *fleettest.Fleet, id string) (status string, response, trace json.RawMessage) {
	t.Helper()
	code, b, _ := f.Do(t, "GET", "/v1/jobs/"+id, nil)
	var v struct {
		Status   string          `json:"status"`
		Response json.RawMessage `json:"response"`
		Trace    json.RawMessage `json:"trace"`
	}
	if err := json.Unmarshal(b, &v); code != 200 || err != nil {
		t.Fatalf("GET /v1/jobs/%s: %d %s", id, code, b)
	}
	return v.Status, v.Response, v.Trace
}

func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

func sameJSON(t *testing.T, what string, a, b json.RawMessage) {
	t.Helper()
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal(b, &y)
	if !reflect.DeepEqual(x, y) {
		t.Errorf("%s: streamed %s, stored %s", what, a, b)
	}
}

// Chat through a search hop, with openai-go's streaming and its accumulator: the
// first token arrives while the job still runs, and the accumulated message is the
// stored answer (text, and the url_citation annotations of the last chunk).
func TestStreamChatLive(t *testing.T) {
	t.Parallel()
	// In a namespace too: the worker publishes the deltas, and the ingress listens, on
	// the namespace's subjects.
	for _, ns := range []string{"", "nsa"} {
		t.Run("namespace="+ns, func(t *testing.T) {
			t.Parallel()
			streamChatLive(t, fleettest.Start(t, fleettest.Env(func(e *config.Env) { e.Namespace = ns })))
		})
	}
}

func streamChatLive(t *testing.T, f *fleettest.Fleet) {
	c := openaiClient(f)
	st := c.Chat.Completions.NewStreaming(ctx(t), openai.ChatCompletionNewParams{
		Model:         demo.Model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage(slowSearch)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var job, atFirst string
	var anns json.RawMessage
	deltas := 0
	for st.Next() {
		ch := st.Current()
		if !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused %s", ch.RawJSON())
		}
		job = strings.TrimPrefix(ch.ID, "chatcmpl-")
		if len(ch.Choices) == 0 {
			continue
		}
		if ch.Choices[0].Delta.Content != "" {
			if deltas++; deltas == 1 {
				atFirst, _, _ = storedJob(t, f, job)
			}
		}
		if a, ok := ch.Choices[0].Delta.JSON.ExtraFields["annotations"]; ok {
			anns = json.RawMessage(a.Raw())
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if atFirst == "" || terminal(atFirst) || deltas < 5 {
		t.Fatalf("%d text deltas; the job was %q at the first: not streamed as written", deltas, atFirst)
	}
	status, stored, _ := storedJob(t, f, job)
	var want struct {
		Choices []struct {
			Message struct {
				Content     string          `json:"content"`
				Annotations json.RawMessage `json:"annotations"`
			} `json:"message"`
		} `json:"choices"`
	}
	json.Unmarshal(stored, &want)
	if status != "completed" || len(want.Choices) == 0 {
		t.Fatalf("job %s: %s", status, stored)
	}
	msg := want.Choices[0].Message
	if got := acc.Choices[0].Message.Content; got != msg.Content || !strings.Contains(got, "[1]") {
		t.Fatalf("accumulated %q, stored %q", got, msg.Content)
	}
	sameJSON(t, "annotations", anns, msg.Annotations)
	if acc.Usage.TotalTokens == 0 || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("usage %+v, finish %q", acc.Usage, acc.Choices[0].FinishReason)
	}
}

// Responses through a search hop, with openai-go: the web_search_call item is
// searching and completed before the first text delta, the first delta arrives while
// the job runs, and the deltas and response.completed equal the stored response
// (GET /v1/responses/{id}), annotations included.
func TestStreamResponsesLive(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	for name, prompt := range map[string]string{"one search": slowSearch, "parallel searches over two hops": slowSearch + " sim:hops=2 sim:calls=2"} {
		t.Run(name, func(t *testing.T) { responsesLive(t, f, prompt) })
	}
}

func responsesLive(t *testing.T, f *fleettest.Fleet, prompt string) {
	c := openaiClient(f)
	st := c.Responses.NewStreaming(ctx(t), responses.ResponseNewParams{
		Model: demo.Model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}},
	})
	var types []string
	var text strings.Builder
	var final responses.Response
	var id, atFirst string
	seq := int64(-1)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq+1 {
			t.Errorf("event %s has sequence_number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			if text.Len() == 0 {
				atFirst, _, _ = storedJob(t, f, id)
			}
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	first := slices.Index(types, "response.output_text.delta")
	if first < 0 || terminal(atFirst) || atFirst == "" {
		t.Fatalf("job %q at the first delta; events %v", atFirst, types)
	}
	for _, before := range []string{"response.web_search_call.searching", "response.web_search_call.completed"} {
		if i := slices.Index(types, before); i < 0 || i > first {
			t.Errorf("%s at %d, first text delta at %d: %v", before, i, first, types)
		}
	}
	stored, err := c.Responses.Get(ctx(t), id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if text.String() != stored.OutputText() || final.OutputText() != stored.OutputText() || !strings.Contains(text.String(), "[1]") {
		t.Fatalf("deltas %q, completed %q, stored %q", text.String(), final.OutputText(), stored.OutputText())
	}
	sameJSON(t, "output", json.RawMessage(outputJSON(final)), json.RawMessage(outputJSON(*stored)))
}

func outputJSON(r responses.Response) string {
	var o struct {
		Output json.RawMessage `json:"output"`
	}
	json.Unmarshal([]byte(r.RawJSON()), &o)
	return string(o.Output)
}

// Anthropic Messages through a search hop, with anthropic-sdk-go's accumulator: the
// server_tool_use and web_search_tool_result blocks come before the text, the first
// text delta and the first citation arrive while the job runs, and the accumulated
// content is the non-streamed rendering of the same job, block for block, citations
// included.
func TestStreamMessagesLive(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	// One search; then two hops of two parallel searches each, whose result blocks
	// must each follow their own server_tool_use block whatever order they finish in.
	for name, prompt := range map[string]string{"one search": slowSearch, "parallel searches over two hops": slowSearch + " sim:hops=2 sim:calls=2"} {
		t.Run(name, func(t *testing.T) { messagesLive(t, f, prompt) })
	}
}

func messagesLive(t *testing.T, f *fleettest.Fleet, prompt string) {
	c := anthropicClient(f)
	st := c.Messages.NewStreaming(ctx(t), anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools:    []anthropic.ToolUnionParam{{OfWebSearchTool20250305: &anthropic.WebSearchTool20250305Param{}}}})
	var acc anthropic.Message
	var atFirst, atCite string
	var kindsAtFirst []string
	for st.Next() {
		ev := st.Current()
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && atFirst == "" {
			atFirst, _, _ = storedJob(t, f, acc.ID)
			for _, b := range acc.Content {
				kindsAtFirst = append(kindsAtFirst, b.Type)
			}
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "citations_delta" && atCite == "" {
			atCite, _, _ = storedJob(t, f, acc.ID)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if atFirst == "" || terminal(atFirst) || len(kindsAtFirst) < 3 || kindsAtFirst[len(kindsAtFirst)-1] != "text" {
		t.Fatalf("at the first text delta the job was %q and the blocks %v", atFirst, kindsAtFirst)
	}
	if atCite == "" || terminal(atCite) {
		t.Errorf("the first citation came when the job was %q: citations not streamed as written", atCite)
	}
	status, stored, trace := storedJob(t, f, acc.ID)
	resp, err := openaichat.Client.DecodeResponse(stored)
	if err != nil || status != "completed" {
		t.Fatalf("job %s: %v", status, err)
	}
	if err := resp.AddTrace(trace); err != nil {
		t.Fatal(err)
	}
	resp.ID, resp.Model = acc.ID, string(acc.Model)
	b, _ := llmanthropic.Client.EncodeResponse(resp)
	var want anthropic.Message
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	var wantKinds []string
	for _, b := range want.Content {
		if wantKinds = append(wantKinds, b.Type); b.Type == "text" {
			break
		}
	}
	if !slices.Equal(kindsAtFirst, wantKinds) {
		t.Errorf("at the first text delta the blocks were %v, want %v", kindsAtFirst, wantKinds)
	}
	if len(acc.Content) != len(want.Content) {
		t.Fatalf("accumulated %d blocks, stored %d: %s", len(acc.Content), len(want.Content), b)
	}
	cited := 0
	for i := range want.Content {
		g, w := acc.Content[i], want.Content[i]
		if g.Type != w.Type || g.Text != w.Text || g.ID != w.ID || string(g.Input) != string(w.Input) || len(g.Citations) != len(w.Citations) {
			t.Fatalf("block %d: accumulated %s, stored %s", i, g.RawJSON(), w.RawJSON())
		}
		for j := range w.Citations {
			cited++
			if g.Citations[j].URL != w.Citations[j].URL || g.Citations[j].Title != w.Citations[j].Title || g.Citations[j].CitedText != w.Citations[j].CitedText {
				t.Errorf("block %d citation %d: %s, stored %s", i, j, g.Citations[j].RawJSON(), w.Citations[j].RawJSON())
			}
		}
		if w.Type == "web_search_tool_result" {
			sameJSON(t, "search result", json.RawMessage(g.Content.RawJSON()), json.RawMessage(w.Content.RawJSON()))
		}
	}
	if cited == 0 || acc.StopReason != "end_turn" || acc.Usage.ServerToolUse.WebSearchRequests != want.Usage.ServerToolUse.WebSearchRequests {
		t.Errorf("%d citations, stop %q, usage %s", cited, acc.StopReason, acc.Usage.RawJSON())
	}
}

// A client that goes away mid-stream does not cancel its job: it completes, with the
// whole answer. Before the first token, the search shows as an SSE comment line.
func TestStreamClientDisconnect(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	body := `{"model":"` + demo.Model + `","stream":true,"messages":[{"role":"user","content":` + strconvQuote(slowSearch) + `}]}`
	resp, err := http.Post(f.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	job := resp.Header.Get("X-Searchfleet-Job-Id")
	sc := bufio.NewScanner(resp.Body)
	searching := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, `: web_search {"id":`) && strings.Contains(line, `"status":"searching"`) {
			searching = true
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			break // the first token
		}
	}
	resp.Body.Close()
	if !searching {
		t.Error("no search progress comment before the first token")
	}
	fleettest.Eventually(t, "the job to complete", func() bool {
		status, _, _ := storedJob(t, f, job)
		return terminal(status)
	})
	status, stored, _ := storedJob(t, f, job)
	if status != "completed" || !strings.Contains(contentOf(stored), "[1]") {
		t.Fatalf("after the client left: %s %s", status, stored)
	}
}

// GET /v1/jobs/{id}/events?deltas=1 interleaves the live text deltas with the job's
// lifecycle events, before its terminal event.
func TestJobEventsWithDeltas(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t)
	body := `{"model":"` + demo.Model + `","stream":true,"messages":[{"role":"user","content":` + strconvQuote(slowSearch) + `}]}`
	resp, err := http.Post(f.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	job := resp.Header.Get("X-Searchfleet-Job-Id")
	ev, err := http.Get(f.URL + "/v1/jobs/" + job + "/events?deltas=1")
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	var names []string
	var text strings.Builder
	sc := bufio.NewScanner(ev.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			names = append(names, name)
		}
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && len(names) > 0 && names[len(names)-1] == "delta" {
			var d struct {
				Hop    int    `json:"hop"`
				Offset int    `json:"offset"`
				Text   string `json:"text"`
			}
			json.Unmarshal([]byte(data), &d)
			text.WriteString(d.Text)
		}
	}
	deltas := slices.Index(names, "delta")
	if deltas < 0 || names[len(names)-1] != "completed" || !slices.Contains(names[:deltas], "model_call") {
		t.Fatalf("events %v", names)
	}
	_, stored, _ := storedJob(t, f, job)
	if text.Len() == 0 || !strings.HasSuffix(contentOf(stored), text.String()) {
		t.Errorf("deltas %q are not the end of the answer %q", text.String(), contentOf(stored))
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func contentOf(resp json.RawMessage) string {
	var m map[string]any
	json.Unmarshal(resp, &m)
	return fleettest.Content(m)
}
