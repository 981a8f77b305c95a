package fleet_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fleet"
	"github.com/searchfleet/searchfleet/pkg/simulator"
)

// stripReasoning is the test switch of the reasoning tests: a transport that, when
// on, removes the reasoning state from the fleet's model requests on the way out
// (Anthropic thinking and redacted_thinking blocks of assistant messages, Responses
// reasoning items, Gemini thought signatures, Chat reasoning_content), as a fleet that dropped it would send them.
type stripReasoning struct {
	on atomic.Bool
	// encrypted, when on, removes only the encrypted_content of Responses reasoning
	// items, which then go by their id alone.
	encrypted atomic.Bool
	base      http.RoundTripper
}

func (s *stripReasoning) RoundTrip(r *http.Request) (*http.Response, error) {
	messages, responses := strings.HasSuffix(r.URL.Path, "/v1/messages"), strings.HasSuffix(r.URL.Path, "/responses")
	gemini := strings.Contains(r.URL.Path, ":generateContent") || strings.Contains(r.URL.Path, ":streamGenerateContent")
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	if !s.on.Load() && !s.encrypted.Load() || r.Body == nil || !messages && !responses && !gemini && !chat {
		return s.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var req map[string]any
	if json.Unmarshal(body, &req) == nil && chat {
		for _, m := range req["messages"].([]any) {
			delete(m.(map[string]any), "reasoning_content")
		}
		body, _ = json.Marshal(req)
	} else if json.Unmarshal(body, &req) == nil && gemini {
		for _, c := range req["contents"].([]any) {
			for _, p := range c.(map[string]any)["parts"].([]any) {
				delete(p.(map[string]any), "thoughtSignature")
			}
		}
		body, _ = json.Marshal(req)
	} else if json.Unmarshal(body, &req) == nil && responses {
		kept := []any{}
		for _, it := range req["input"].([]any) {
			item := it.(map[string]any)
			if item["type"] == "reasoning" && s.encrypted.Load() {
				delete(item, "encrypted_content")
			}
			if item["type"] != "reasoning" || !s.on.Load() {
				kept = append(kept, it)
			}
		}
		req["input"] = kept
		body, _ = json.Marshal(req)
	} else if json.Unmarshal(body, &req) == nil {
		msgs, _ := req["messages"].([]any)
		for _, m := range msgs {
			msg := m.(map[string]any)
			blocks, ok := msg["content"].([]any)
			if !ok {
				continue
			}
			kept := []any{}
			for _, b := range blocks {
				if t := b.(map[string]any)["type"]; t != "thinking" && t != "redacted_thinking" {
					kept = append(kept, b)
				}
			}
			msg["content"] = kept
		}
		body, _ = json.Marshal(req)
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return s.base.RoundTrip(r)
}

// reasoner is the reasoning fleet's Responses model that reasons unasked.
const reasoner = "sim-reasoner"

// reasoningFleet starts a fleet whose model requests pass through the switch.
func reasoningFleet(t *testing.T) (*fleettest.Fleet, *stripReasoning) {
	rdb, prefix := testenv.Redis(t)
	sim := simulator.New(simulator.Options{})
	hs, simURL, err := sim.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	env := fleettest.Settings()
	env.NATSURL, env.KeyPrefix = bustest.Server(t), prefix
	file := demo.Config(simURL, sim.EngineConfigs(simURL))
	// A Responses reasoning model (by its name) that reasons when asked nothing.
	file.Models[reasoner] = config.ModelRoute{Provider: file.Models[demo.ModelResponses].Provider, Model: "gpt-5-sim"}
	sw := &stripReasoning{base: fleet.Transport()}
	url, _ := fleettest.RunWith(t, env, file, rdb, func(o *fleet.Options) { o.HTTPClient = &http.Client{Transport: sw} })
	return &fleettest.Fleet{URL: url, Sim: sim, SimURL: simURL, File: file, Env: env}, sw
}

// A Messages client asks the Claude brain with thinking enabled: every hop of the
// search loop sends the earlier hops' thinking blocks back verbatim before their
// tool_use (the strict simulator checks each signature and refuses a turn that lost
// them), and the answer carries the model's thinking block, signed. With the switch
// on (the thinking blocks removed on the way out) the simulator refuses the second
// hop with Anthropic's error and the question fails.
func TestAnthropicThinkingSurvivesTheSearchLoop(t *testing.T) {
	t.Parallel()
	f, sw := reasoningFleet(t)
	c := anthropicClient(f)
	params := anthropic.MessageNewParams{Model: anthropic.Model(demo.ModelClaude), MaxTokens: 2048,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(searchPrompt + " sim:hops=2"))}}
	msg, err := c.Messages.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, b := range msg.Content {
		kinds = append(kinds, b.Type)
		if b.Type == "thinking" && (b.Signature == "" || b.Thinking == "") {
			t.Errorf("thinking block without its text or signature: %s", b.RawJSON())
		}
	}
	if !strings.Contains(strings.Join(kinds, ","), "thinking,text") || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("content %v, stop %q: %s", kinds, msg.StopReason, msg.RawJSON())
	}
	if strings.Contains(msg.RawJSON(), "not honoured") {
		t.Errorf("a warning says thinking is not honoured: %s", msg.RawJSON())
	}
	st := f.Sim.Stats().Requests
	if st["model_reasoning_verified"] < 2 || st["model_reasoning_refused"] != 0 {
		t.Fatalf("the simulator verified the thinking of %d hops and refused %d; want every hop after the first verified (2), none refused",
			st["model_reasoning_verified"], st["model_reasoning_refused"])
	}

	// Streamed: the thinking block arrives as thinking_delta and signature_delta.
	stream := c.Messages.NewStreaming(ctx(t), params)
	var acc anthropic.Message
	deltas := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" {
			deltas[ev.Delta.Type]++
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	signed := false
	for _, b := range acc.Content {
		signed = signed || b.Type == "thinking" && b.Signature != "" && b.Thinking != ""
	}
	if !signed || deltas["thinking_delta"] == 0 || deltas["signature_delta"] == 0 {
		t.Fatalf("streamed answer has no signed thinking block (deltas %v): %s", deltas, acc.RawJSON())
	}

	// The switch: the state removed on the way out, the simulator refuses.
	sw.on.Store(true)
	_, err = c.Messages.New(ctx(t), params)
	if err == nil {
		t.Fatal("with the thinking blocks removed the question still completed: the simulator does not check them")
	}
	if f.Sim.Stats().Requests["model_reasoning_refused"] == 0 {
		t.Fatalf("the question failed (%v), but not because the simulator refused the stripped thinking", err)
	}
}

// A Chat client's reasoning_effort reaches the Claude brain as a thinking budget, and
// the thinking survives the loop the same way; the Chat answer carries the model's
// thinking as reasoning_content.
func TestChatReasoningEffortOnClaude(t *testing.T) {
	t.Parallel()
	f, _ := reasoningFleet(t)
	status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.ModelClaude, "reasoning_effort": "low",
		"messages": []any{map[string]any{"role": "user", "content": searchPrompt}}})
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if rc, _ := msg["reasoning_content"].(string); rc == "" || !strings.Contains(fleettest.Content(resp), "[1]") {
		t.Fatalf("message %v", msg)
	}
	if st := f.Sim.Stats().Requests; st["model_reasoning_verified"] < 1 || st["model_reasoning_refused"] != 0 {
		t.Fatalf("verified %d, refused %d", st["model_reasoning_verified"], st["model_reasoning_refused"])
	}
}

// A Chat client's reasoning_effort reaches the Responses brain as reasoning.effort
// with include ["reasoning.encrypted_content"] (the fleet stores nothing at the
// provider); the reasoning item of each hop goes back, encrypted content unaltered,
// before the function_call it led to, which the strict simulator checks. With the
// switch on it refuses the second hop and the question fails.
func TestResponsesReasoningItemsSurviveTheSearchLoop(t *testing.T) {
	t.Parallel()
	f, sw := reasoningFleet(t)
	ask := func() (int, []byte) {
		status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.ModelResponses, "reasoning_effort": "medium",
			"messages": []any{map[string]any{"role": "user", "content": searchPrompt + " sim:hops=2"}}})
		return status, body
	}
	status, body := ask()
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != http.StatusOK || !strings.Contains(fleettest.Content(resp), "[1]") {
		t.Fatalf("status %d: %s", status, body)
	}
	if st := f.Sim.Stats().Requests; st["model_reasoning_verified"] < 2 || st["model_reasoning_refused"] != 0 {
		t.Fatalf("the simulator verified the reasoning items of %d hops and refused %d; want every hop after the first (2), none refused",
			st["model_reasoning_verified"], st["model_reasoning_refused"])
	}
	sw.on.Store(true)
	if status, body := ask(); status == http.StatusOK {
		t.Fatalf("with the reasoning items removed the question still completed: %s", body)
	}
	if f.Sim.Stats().Requests["model_reasoning_refused"] == 0 {
		t.Fatal("the question failed, but not because the simulator refused the stripped reasoning")
	}
}

// A Chat client's reasoning_effort reaches the Gemini brain as a thinkingConfig, and
// each functionCall part goes back with the thoughtSignature the model gave it (not
// Google's sentinel), which the strict simulator checks on every hop. With the switch
// on it refuses the second hop and the question fails.
func TestGeminiThoughtSignaturesSurviveTheSearchLoop(t *testing.T) {
	t.Parallel()
	f, sw := reasoningFleet(t)
	ask := func() (int, []byte) {
		status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.ModelGemini, "reasoning_effort": "high",
			"messages": []any{map[string]any{"role": "user", "content": searchPrompt + " sim:hops=2"}}})
		return status, body
	}
	status, body := ask()
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != http.StatusOK || !strings.Contains(fleettest.Content(resp), "[1]") {
		t.Fatalf("status %d: %s", status, body)
	}
	if st := f.Sim.Stats().Requests; st["model_reasoning_verified"] < 2 || st["model_reasoning_refused"] != 0 {
		t.Fatalf("the simulator verified the thought signatures of %d hops and refused %d; want every hop after the first (2), none refused",
			st["model_reasoning_verified"], st["model_reasoning_refused"])
	}
	sw.on.Store(true)
	if status, body := ask(); status == http.StatusOK {
		t.Fatalf("with the thought signatures removed the question still completed: %s", body)
	}
	if f.Sim.Stats().Requests["model_reasoning_refused"] == 0 {
		t.Fatal("the question failed, but not because the simulator refused the missing signatures")
	}
}

// A Chat client's reasoning_effort reaches a Chat-compatible thinking model (DeepSeek,
// Kimi style) as it is; the reasoning_content of each hop's assistant message with
// tool_calls goes back with it, which the strict simulator checks; the Chat answer
// carries the model's reasoning_content. With the switch on it refuses the second
// hop and the question fails.
func TestChatReasoningContentSurvivesTheSearchLoop(t *testing.T) {
	t.Parallel()
	f, sw := reasoningFleet(t)
	ask := func() (int, []byte) {
		status, body, _ := f.Do(t, "POST", "/v1/chat/completions", map[string]any{"model": demo.Model, "reasoning_effort": "high",
			"messages": []any{map[string]any{"role": "user", "content": searchPrompt + " sim:hops=2"}}})
		return status, body
	}
	status, body := ask()
	var resp map[string]any
	if err := json.Unmarshal(body, &resp); err != nil || status != http.StatusOK || !strings.Contains(fleettest.Content(resp), "[1]") {
		t.Fatalf("status %d: %s", status, body)
	}
	msg := resp["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if rc, _ := msg["reasoning_content"].(string); rc == "" {
		t.Errorf("the answer has no reasoning_content: %v", msg)
	}
	if st := f.Sim.Stats().Requests; st["model_reasoning_verified"] < 2 || st["model_reasoning_refused"] != 0 {
		t.Fatalf("the simulator verified the reasoning_content of %d hops and refused %d; want every hop after the first (2), none refused",
			st["model_reasoning_verified"], st["model_reasoning_refused"])
	}
	sw.on.Store(true)
	if status, body := ask(); status == http.StatusOK {
		t.Fatalf("with reasoning_content removed the question still completed: %s", body)
	}
	if f.Sim.Stats().Requests["model_reasoning_refused"] == 0 {
		t.Fatal("the question failed, but not because the simulator refused the missing reasoning_content")
	}
}

// A Responses client that asks for reasoning summaries (reasoning.summary) gets the
// model's reasoning as a reasoning item before the message, through openai-go,
// non-streamed and streamed: from the Claude brain its thinking (the reasoning effort
// went to it as a thinking budget, and the thinking survived the search loop), from
// the Responses brain its own reasoning item's summary, from the Gemini brain its
// thought summary (includeThoughts). Asked without a summary, the Claude brain's
// thinking is not given.
func TestResponsesClientsReceiveReasoningSummaries(t *testing.T) {
	t.Parallel()
	f, _ := reasoningFleet(t)
	c := openaiClient(f)
	params := func(model, summary string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: model,
			Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow, Summary: shared.ReasoningSummary(summary)},
			Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String(searchPrompt + " sim:hops=2")},
			Tools:     []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}}
	}
	summaries := func(out []responses.ResponseOutputItemUnion) (kinds []string, text string) {
		for _, it := range out {
			kinds = append(kinds, it.Type)
			for _, s := range it.AsReasoning().Summary {
				text += s.Text
			}
		}
		return kinds, text
	}
	for _, model := range []string{demo.ModelClaude, demo.ModelResponses, demo.ModelGemini} {
		resp, err := c.Responses.New(ctx(t), params(model, "auto"))
		if err != nil {
			t.Fatal(err)
		}
		kinds, text := summaries(resp.Output)
		if !strings.Contains(strings.Join(kinds, ","), "reasoning,message") || text == "" || !strings.Contains(resp.OutputText(), "[1]") {
			t.Fatalf("%s: output %v, summary %q: %s", model, kinds, text, resp.RawJSON())
		}

		st := c.Responses.NewStreaming(ctx(t), params(model, "auto"))
		var deltas string
		var final responses.Response
		for st.Next() {
			switch ev := st.Current(); ev.Type {
			case "response.reasoning_summary_text.delta":
				deltas += ev.Delta
			case "response.completed":
				final = ev.Response
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if kinds, text := summaries(final.Output); deltas == "" || text != deltas || !slices.Contains(kinds, "reasoning") {
			t.Fatalf("%s: streamed summary %q, completed output %v with summary %q", model, deltas, kinds, text)
		}
	}

	resp, err := c.Responses.New(ctx(t), params(demo.ModelClaude, ""))
	if err != nil {
		t.Fatal(err)
	}
	if kinds, _ := summaries(resp.Output); slices.Contains(kinds, "reasoning") {
		t.Fatalf("no summary asked, but the output has a reasoning item: %s", resp.RawJSON())
	}
}

// A reasoning setting the model cannot take is named in the answer's
// searchfleet.warnings, in the client's parameter names: a Responses reasoning.summary
// sent to a Chat model, Messages adaptive thinking sent to a Responses model; a
// setting it takes (the summary to a Responses model) is not.
func TestReasoningSettingsAModelCannotTakeAreNamed(t *testing.T) {
	t.Parallel()
	f, _ := reasoningFleet(t)
	warnings := func(path string, body map[string]any) string {
		status, b, _ := f.Do(t, "POST", path, body)
		var resp struct {
			Searchfleet struct {
				Warnings []string `json:"warnings"`
			} `json:"searchfleet"`
		}
		if err := json.Unmarshal(b, &resp); err != nil || status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		return strings.Join(resp.Searchfleet.Warnings, "; ")
	}
	summary := map[string]any{"effort": "low", "summary": "auto"}
	if w := warnings("/v1/responses", map[string]any{"model": demo.Model, "input": "hi sim:nosearch", "reasoning": summary}); !strings.Contains(w, "reasoning.summary is not honoured") {
		t.Errorf("summary to a Chat model: warnings %q", w)
	}
	if w := warnings("/v1/responses", map[string]any{"model": demo.ModelResponses, "input": "hi sim:nosearch", "reasoning": summary}); strings.Contains(w, "reasoning") {
		t.Errorf("summary to a Responses model: warnings %q", w)
	}
	if w := warnings("/v1/messages", map[string]any{"model": demo.ModelResponses, "max_tokens": 1024, "thinking": map[string]any{"type": "adaptive"},
		"messages": []any{map[string]any{"role": "user", "content": "hi sim:nosearch"}}}); !strings.Contains(w, "thinking.type adaptive is not honoured") {
		t.Errorf("adaptive thinking to a Responses model: warnings %q", w)
	}
}

// A Messages client that asks for thinking gets every model's reasoning back as
// thinking blocks, and no note that it is not honoured: Gemini's thought summary
// (includeThoughts asked), a Responses model's summary, a Chat thinking model's
// reasoning_content. The blocks carry the model's own state, so a client that sends
// them back with its tool result, as Anthropic's docs ask, continues the model's
// reasoning: the strict simulator, playing a Kimi-style Chat thinking model, checks
// the reasoning_content of the client's tool call turn, and refuses the same turn sent
// without its thinking blocks.
func TestMessagesClientsGetEveryModelsThinking(t *testing.T) {
	t.Parallel()
	f, _ := reasoningFleet(t)
	c := anthropicClient(f)
	thinking := func(m *anthropic.Message) (text string) {
		for _, b := range m.Content {
			if b.Type == "thinking" {
				text += b.Thinking
			}
		}
		return text
	}
	for _, model := range []string{demo.ModelGemini, demo.ModelResponses, demo.Model} {
		msg, err := c.Messages.New(ctx(t), anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 2048,
			Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(searchPrompt + " sim:hops=2"))}})
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if thinking(msg) == "" || msg.StopReason != anthropic.StopReasonEndTurn || strings.Contains(msg.RawJSON(), "not returned") {
			t.Errorf("%s: no thinking blocks, or a note: %s", model, msg.RawJSON())
		}
	}

	weather := anthropic.ToolParam{Name: "get_weather", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}
	ask := anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris sim:tool=get_weather sim:nosearch"))
	params := func(msgs ...anthropic.MessageParam) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(demo.Model), MaxTokens: 2048, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
			Tools: []anthropic.ToolUnionParam{{OfTool: &weather}}, Messages: msgs}
	}
	first, err := c.Messages.New(ctx(t), params(ask))
	if err != nil {
		t.Fatal(err)
	}
	var call anthropic.ContentBlockUnion
	for _, b := range first.Content {
		if b.Type == "tool_use" {
			call = b
		}
	}
	if first.StopReason != anthropic.StopReasonToolUse || call.ID == "" || thinking(first) == "" {
		t.Fatalf("first turn: %s", first.RawJSON())
	}
	result := anthropic.NewUserMessage(anthropic.NewToolResultBlock(call.ID, `{"temp_c": 18}`, false))
	verified := f.Sim.Stats().Requests["model_reasoning_verified"]
	next, err := c.Messages.New(ctx(t), params(ask, first.ToParam(), result))
	if err != nil {
		t.Fatalf("the tool result with the thinking blocks sent back: %v", err)
	}
	if next.StopReason != anthropic.StopReasonEndTurn || f.Sim.Stats().Requests["model_reasoning_verified"] <= verified {
		t.Fatalf("the model's reasoning_content did not come back with the client's turn: %s", next.RawJSON())
	}

	bare := first.ToParam()
	var kept []anthropic.ContentBlockParamUnion
	for _, b := range bare.Content {
		if b.OfThinking == nil && b.OfRedactedThinking == nil {
			kept = append(kept, b)
		}
	}
	bare.Content = kept
	if _, err := c.Messages.New(ctx(t), params(ask, bare, result)); err == nil {
		t.Fatal("the client's turn without its thinking blocks was accepted: the simulator does not check reasoning_content")
	}
}

// The reasoning matrix: each of the four reasoning families (Claude's signed thinking,
// Responses reasoning items, Gemini thought signatures, a Chat thinking model's
// reasoning_content) answers a two-hop search question from each client protocol
// (Chat reasoning_effort, Responses reasoning.effort, Messages thinking), whole and
// streamed, with the strict simulator verifying the model's own state on every hop
// after the first (a Responses reasoning item with its encrypted content: one by id
// alone is refused, the fleet stores nothing at the provider); with the state removed
// on the way out (the switch) the simulator refuses and the question fails.
func TestReasoningSurvivesTheSearchLoopFromEveryClient(t *testing.T) {
	t.Parallel()
	f, sw := reasoningFleet(t)
	question := searchPrompt + " sim:hops=2"
	clients := []struct {
		name, path string
		body       func(model string) map[string]any
	}{
		{"chat", "/v1/chat/completions", func(model string) map[string]any {
			return map[string]any{"model": model, "reasoning_effort": "high", "messages": []any{map[string]any{"role": "user", "content": question}}}
		}},
		{"responses", "/v1/responses", func(model string) map[string]any {
			return map[string]any{"model": model, "reasoning": map[string]any{"effort": "high"}, "input": question}
		}},
		{"messages", "/v1/messages", func(model string) map[string]any {
			return map[string]any{"model": model, "max_tokens": 4096, "thinking": map[string]any{"type": "enabled", "budget_tokens": 2048},
				"messages": []any{map[string]any{"role": "user", "content": question}}}
		}},
	}
	stats := func() (verified, refused int) {
		st := f.Sim.Stats().Requests
		return int(st["model_reasoning_verified"]), int(st["model_reasoning_refused"])
	}
	for _, model := range []string{demo.ModelClaude, demo.ModelResponses, demo.ModelGemini, demo.Model} {
		for _, c := range clients {
			for _, stream := range []bool{false, true} {
				name := c.name
				body := c.body(model)
				if stream {
					name, body["stream"] = c.name+" streamed", true
				}
				sw.on.Store(false)
				v0, r0 := stats()
				status, out, _ := f.Do(t, "POST", c.path, body)
				v1, r1 := stats()
				if !answered(status, out) {
					t.Errorf("%s from %s: status %d: %s", model, name, status, out)
					continue
				}
				if v1-v0 < 2 || r1 != r0 {
					t.Errorf("%s from %s: the simulator verified the reasoning of %d hops and refused %d; want every hop after the first (2), none refused", model, name, v1-v0, r1-r0)
				}
				if stream {
					continue
				}
				sw.on.Store(true)
				if status, out, _ := f.Do(t, "POST", c.path, body); status == http.StatusOK {
					t.Errorf("%s from %s: with the reasoning state removed the question still completed: %s", model, name, out)
				}
				if _, r2 := stats(); r2 == r1 {
					t.Errorf("%s from %s: the question failed, but not because the simulator refused the stripped state", model, name)
				}
			}
		}
	}
}

// answered reports whether a create request's answer, whole or streamed, completed
// with the search's first citation and no error.
func answered(status int, body []byte) bool {
	b := string(body)
	return status == http.StatusOK && strings.Contains(b, "[1]") && !strings.Contains(b, `"error":{`) && !strings.Contains(b, "response.failed")
}

// A Chat client and a Messages client that ask for no reasoning put a search question
// to a Responses reasoning model, which reasons at its default effort all the same:
// the fleet asks it for reasoning.encrypted_content on every call (the fleet stores
// nothing at the provider) and sends each hop's reasoning item back with it, whole
// and streamed; the strict simulator verifies it on every hop after the first. With
// the encrypted content removed on the way out, the item goes by its id alone, which
// the simulator refuses as OpenAI does under store false, and the question fails.
func TestResponsesReasoningModelAskedNothingKeepsItsState(t *testing.T) {
	t.Parallel()
	f, sw := reasoningFleet(t)
	question := searchPrompt + " sim:hops=2"
	asks := []struct{ name, path string }{{"chat", "/v1/chat/completions"}, {"messages", "/v1/messages"}}
	body := func(path string, stream bool) map[string]any {
		b := map[string]any{"model": reasoner, "stream": stream, "messages": []any{map[string]any{"role": "user", "content": question}}}
		if path == "/v1/messages" {
			b["max_tokens"] = 4096
		}
		return b
	}
	for _, c := range asks {
		for _, stream := range []bool{false, true} {
			st0 := f.Sim.Stats().Requests
			status, out, _ := f.Do(t, "POST", c.path, body(c.path, stream))
			st1 := f.Sim.Stats().Requests
			if !answered(status, out) {
				t.Errorf("%s (stream %v): status %d: %s", c.name, stream, status, out)
				continue
			}
			if v := st1["model_reasoning_verified"] - st0["model_reasoning_verified"]; v < 2 || st1["model_reasoning_refused"] != st0["model_reasoning_refused"] {
				t.Errorf("%s (stream %v): the simulator verified %d hops' reasoning and refused %d; want 2, none", c.name, stream, v, st1["model_reasoning_refused"]-st0["model_reasoning_refused"])
			}
		}
	}
	sw.encrypted.Store(true)
	r0 := f.Sim.Stats().Requests["model_reasoning_refused"]
	if status, out, _ := f.Do(t, "POST", "/v1/chat/completions", body("/v1/chat/completions", false)); status == http.StatusOK {
		t.Fatalf("with the reasoning item sent by id alone the question still completed: %s", out)
	}
	if f.Sim.Stats().Requests["model_reasoning_refused"] == r0 {
		t.Fatal("the question failed, but not because the simulator refused the reasoning item by id")
	}
}
