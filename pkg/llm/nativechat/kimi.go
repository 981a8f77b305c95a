package nativechat

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// Kimi's $web_search (WIRE_FORMATS.md §5, the recorded transcript in
// internal/fixtures/moonshot): the request declares
// {"type":"builtin_function","function":{"name":"$web_search"}} (on every round); the
// model answers finish_reason "tool_calls" with a $web_search call whose arguments
// hold an opaque search_id; the assistant message goes back as it came with a "tool"
// message carrying those arguments verbatim; Moonshot runs the search and the model
// answers, its sources only as markdown links [title](url) in the text.

// KimiWebSearch is the builtin function's name.
const KimiWebSearch = "$web_search"

// kimiTool is the builtin function's declaration.
var kimiTool = json.RawMessage(`{"type":"builtin_function","function":{"name":"$web_search"}}`)

// kimiMaxRounds bounds the search rounds of one answer: one search usually suffices;
// a model still searching after four is cut off (its answer so far is returned).
const kimiMaxRounds = 4

// kimiThinkingRE matches the models that think by default, which must have thinking
// disabled to use $web_search (WIRE_FORMATS.md §5).
var kimiThinkingRE = regexp.MustCompile(`^kimi-k2\.[5-9]`)

// kimi runs the rounds of one answer: each $web_search call is echoed and the model
// called again (with call, from the callback of the round before), up to
// kimiMaxRounds; usage is summed over the rounds. The answer's text is the text of
// every round (a round that searched rarely says anything), its links numbered as [n]
// markers (kimiCiter).
func (c *Caller) kimi(ctx context.Context, req *request, onDelta func(llm.Delta), call callFunc, done func(*llm.Completion, error)) {
	req.tools = append(req.tools, kimiTool)
	var model string
	json.Unmarshal(req.top["model"], &model)
	if _, set := req.top["thinking"]; !set && kimiThinkingRE.MatchString(model) {
		req.top["thinking"] = json.RawMessage(`{"type":"disabled"}`)
	}
	k := &kimiRun{ctx: ctx, req: req, always: c.always, onDelta: onDelta, call: call, done: done,
		text:   &lineStream{onDelta: onDelta, cites: linkCites, clean: cleanLine},
		report: &llm.NativeSearch{Protocol: Kimi.Protocol(), Searches: []llm.NativeQuery{}}}
	k.round(1)
}

// kimiRun is one Kimi answer in progress. Its rounds run one after the other, each
// started from the callback of the one before, so its fields need no lock.
type kimiRun struct {
	ctx     context.Context
	req     *request
	onDelta func(llm.Delta)
	call    callFunc
	done    func(*llm.Completion, error)
	text    *lineStream
	report  *llm.NativeSearch
	usage   llm.Usage
	always  bool // report without a search too (NewForEngine)
}

// round calls the model for round n.
func (k *kimiRun) round(n int) {
	body, err := k.req.encode()
	if err != nil {
		k.done(nil, err)
		return
	}
	var push func(llm.Delta)
	if k.onDelta != nil {
		push = func(d llm.Delta) { k.text.push(d.Text) }
	}
	k.call(k.ctx, body, push, func(comp *llm.Completion, err error) {
		if err != nil {
			k.done(nil, err)
			return
		}
		k.answered(n, comp)
	})
}

// answered takes round n's answer: its $web_search calls are echoed and the next
// round started, or it is the answer.
func (k *kimiRun) answered(n int, comp *llm.Completion) {
	k.usage.Add(comp.Usage)
	a, err := readAnswer(comp.Message)
	if err != nil {
		k.done(nil, &llm.Error{Status: http.StatusBadGateway, Type: "bad_response", Message: "the model's answer is not a chat message"})
		return
	}
	if k.onDelta == nil {
		k.text.push(a.content)
	}
	native, others := a.splitCalls()
	for _, call := range native {
		k.report.Requests++
		k.report.Searches = append(k.report.Searches, llm.NativeQuery{ID: call.ID, URLs: []string{}})
	}
	if len(native) > 0 && len(others) == 0 && comp.FinishReason == "tool_calls" && n == kimiMaxRounds {
		k.report.Unfinished = true
	}
	if len(native) == 0 || len(others) > 0 || comp.FinishReason != "tool_calls" || n == kimiMaxRounds {
		// The answer (a $web_search mixed with other calls is not echoed: the chain
		// answers the others, and the model reads no search results in that round).
		k.done(k.answer(comp, a, others), nil)
		return
	}
	// Echo: the assistant message as it came, and each call's arguments verbatim.
	k.req.messages = append(k.req.messages, comp.Message)
	for _, call := range native {
		echo, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": call.ID, "name": KimiWebSearch, "content": call.Function.Arguments})
		k.req.messages = append(k.req.messages, echo)
	}
	k.text.separate()
	k.round(n + 1)
}

// answer is the Completion of the last round: the text of every round with [n]
// markers, and the calls for the chain to run.
func (k *kimiRun) answer(comp *llm.Completion, a *answer, others []json.RawMessage) *llm.Completion {
	report := k.report
	content, sources := CiteLinks(k.text.String())
	report.CostUSD = float64(report.Requests) * kimiSearchUSD
	report.Sources = sources
	if n := len(report.Searches); n > 0 {
		// Kimi does not say which search found which page: the cited pages are the
		// last search's.
		for _, s := range sources {
			report.Searches[n-1].URLs = append(report.Searches[n-1].URLs, s.URL)
		}
	}
	finish := comp.FinishReason
	if len(others) == 0 && finish == "tool_calls" {
		finish = "stop"
	}
	var out *llm.NativeSearch
	if report.Requests > 0 || k.always {
		out = report
	}
	return &llm.Completion{ID: comp.ID, Model: comp.Model, Message: withReport(a.fields, content, others, out), FinishReason: finish, Usage: k.usage}
}

// answer is one round's assistant message.
type answer struct {
	fields  map[string]json.RawMessage
	content string
	calls   []json.RawMessage
}

func readAnswer(msg json.RawMessage) (*answer, error) {
	a := &answer{}
	if err := json.Unmarshal(msg, &a.fields); err != nil {
		return nil, err
	}
	a.content = llm.Text(a.fields["content"])
	if raw := a.fields["tool_calls"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &a.calls); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// splitCalls separates the answer's $web_search calls from the calls the chain runs
// (the fleet's tools, the client's), each kept as the model wrote it.
func (a *answer) splitCalls() (native []llm.ToolCall, others []json.RawMessage) {
	for _, raw := range a.calls {
		var tc llm.ToolCall
		if json.Unmarshal(raw, &tc) == nil && tc.Function.Name == KimiWebSearch {
			native = append(native, tc)
			continue
		}
		others = append(others, raw)
	}
	return native, others
}
