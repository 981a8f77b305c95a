package chat

import (
	"encoding/json"
	"slices"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// annotation is an OpenAI chat url_citation annotation.
type annotation struct {
	Type        string      `json:"type"`
	URLCitation urlCitation `json:"url_citation"`
}

type urlCitation struct {
	URL        string `json:"url"`
	Title      string `json:"title"`
	StartIndex int    `json:"start_index"`
	EndIndex   int    `json:"end_index"`
}

// annotate maps each [n] marker of text to a url_citation of source n, with
// character (code point) offsets of the marker, as OpenAI reports them.
func annotate(text string, srcs []engines.Source) []annotation {
	out := []annotation{}
	for _, m := range llm.CitationMarkers(text, len(srcs)) {
		s := srcs[m.N-1].Web
		out = append(out, annotation{Type: "url_citation", URLCitation: urlCitation{URL: s.URI, Title: s.Title, StartIndex: m.Start, EndIndex: m.End}})
	}
	return out
}

// splitCalls sorts a turn's tool calls into the fleet's server-tool calls (web_search,
// web_fetch: the registry's tools) and the client's calls. A server-tool call on a hop
// that did not offer that tool (past the hop limit, no URL to read) is stray: it is
// neither run nor returned. A client that declared a tool of the same name keeps it.
func splitCalls(t *turn, clientTools []string) (server, client []wire.ToolCall) {
	for _, tc := range t.Calls() {
		name := tc.Name
		switch {
		case serverTools[name] == nil || slices.Contains(clientTools, name):
			client = append(client, tc)
		case name == intent.ToolName && t.Offered, name == intent.FetchToolName && t.Fetch:
			server = append(server, tc)
		default:
			// stray: dropped
		}
	}
	return server, client
}

// buildResponse renders the final chat.completion for hop h's answer: the model's
// message as it sent it, minus the fleet's own tool calls, with url_citation
// annotations for the [n] markers that cite the chain's sources. It returns the
// response, its finish reason, the message as the client sees it (in canonical form) and what checking
// its citations found: a marker that cites no retrieved source is removed from the
// text (checkCitations). searches is the job's billed searches, as its usage counts
// them (a refused or failed search is not one).
func buildResponse(v *view, h int, t *turn, srcs *sources, searches int) (json.RawMessage, string, wire.Message, citationCount) {
	msg, finish := t.ChatMessage() // the native report is the job record's: the client never sees it
	_, client := splitCalls(t, v.toolNames)
	if len(client) > 0 {
		calls := make([]llm.ToolCall, 0, len(client))
		for _, c := range client {
			calls = append(calls, c.Chat())
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	} else {
		delete(msg, "tool_calls")
		if finish == "tool_calls" {
			finish = "stop"
		}
	}
	text, cites := checkCitations(t.Text(), len(srcs.list))
	if cites.Removed > 0 {
		msg["content"] = text
	}
	msg["annotations"] = annotate(text, srcs.list)
	mb, _ := json.Marshal(msg)
	shown := wire.Message{Role: wire.RoleAssistant, Parts: []wire.Part{{Kind: wire.PartText, Text: text}}}
	for _, c := range client {
		shown.Parts = append(shown.Parts, wire.Part{Kind: wire.PartToolCall, Call: &c})
	}

	usage := chainUsage(v, h)
	sources := make([]map[string]string, 0, len(srcs.list))
	for _, s := range srcs.list {
		sources = append(sources, map[string]string{"title": s.Web.Title, "url": s.Web.URI})
	}
	fetches := 0
	for k := 0; k <= h; k++ {
		for _, c := range v.calls(k) {
			if !c.Local && c.Tool == intent.FetchToolName {
				fetches++
			}
		}
	}
	ext := map[string]any{"job_id": v.job.ID, "hops": h + 1, "searches": searches, "sources": sources, "citations": cites}
	if fetches > 0 {
		ext["fetches"] = fetches
	}
	if w := chatWarnings(v); len(w) > 0 {
		ext["warnings"] = w
	}
	resp := map[string]any{
		"id":      "chatcmpl-" + v.job.ID,
		"object":  "chat.completion",
		"created": v.job.Created.Unix(),
		"model":   v.job.Model,
		"choices": []any{map[string]any{"index": 0, "message": json.RawMessage(mb), "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]int{"prompt_tokens": usage.PromptTokens, "completion_tokens": usage.CompletionTokens, "total_tokens": usage.TotalTokens},
		// searchfleet is an extension the OpenAI SDKs ignore: the job, the sources
		// the [n] markers (and annotations) refer to, what checking the citations
		// found, and the request's settings the fleet could not honour.
		"searchfleet": ext,
	}
	b, _ := json.Marshal(resp)
	return b, finish, shown, cites
}

// chatWarnings are the notes a Chat client's answer carries in searchfleet.warnings:
// the request's search settings the fleet cannot honour. A request that arrived in
// another protocol gets none here: the ingress adds its notes when it renders the
// answer in that protocol, and they would otherwise be repeated.
func chatWarnings(v *view) []string {
	if v.protocol != wire.OpenAIChat {
		return nil
	}
	out := append([]string(nil), v.req.Notes...)
	if v.req.Search != nil {
		out = append(out, v.req.Search.Unhonoured...)
	}
	return out
}
