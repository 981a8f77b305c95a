package chat

import (
	"slices"

	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// cite maps each [n] marker of text to a citation of source n, with character (code
// point) offsets of the marker, as OpenAI reports them.
func cite(text string, srcs []engines.Source) []wire.Citation {
	var out []wire.Citation
	for _, m := range llm.CitationMarkers(text, len(srcs)) {
		s := srcs[m.N-1].Web
		out = append(out, wire.Citation{URL: s.URI, Title: s.Title, Start: m.Start, End: m.End})
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

// buildResponse is hop h's answer as the job stores it, in canonical form
// (wire.EncodeAnswer; each protocol renders it when it is read): the model's reasoning
// and text as it sent them, minus the fleet's own tool calls, its [n] markers as
// citations of the chain's sources, and what the search loop did. A marker that cites
// no retrieved source is removed from the text (checkCitations). It returns the
// answer and the message as the client sees it. sp is what the job spent: its
// billed searches (a refused or failed search is not one) and fetches.
func buildResponse(v *view, h int, t *turn, srcs *sources, sp wire.Spend) (*wire.Response, wire.Message) {
	_, client := splitCalls(t, v.toolNames)
	text, cites := checkCitations(t.Text(), len(srcs.list))
	resp := &wire.Response{ID: "chatcmpl-" + v.job.ID, JobID: v.job.ID, Model: v.job.Model, Created: v.job.Created, Status: wire.StatusCompleted,
		Stop: t.Stop, Notes: v.req.AllNotes()} // searchfleet.warnings: the request's settings the fleet cannot honour
	for _, p := range t.Parts {
		if p.Kind == wire.PartReasoning {
			resp.Content = append(resp.Content, p)
		}
	}
	answer := wire.Part{Kind: wire.PartText, Text: text, Citations: cite(text, srcs.list)}
	resp.Content = append(resp.Content, answer)
	shown := wire.Message{Role: wire.RoleAssistant, Parts: []wire.Part{answer}}
	for _, c := range client {
		part := wire.Part{Kind: wire.PartToolCall, Call: &c}
		resp.Content = append(resp.Content, part)
		shown.Parts = append(shown.Parts, part)
	}
	switch {
	case len(client) > 0:
		resp.Stop = wire.StopToolUse
	case resp.Stop == wire.StopToolUse || resp.Stop == "":
		resp.Stop = wire.StopEndTurn
	}
	usage := chainUsage(v, h)
	resp.Usage = wire.Usage{InputTokens: usage.PromptTokens, OutputTokens: usage.CompletionTokens}
	for _, s := range srcs.list {
		resp.Sources = append(resp.Sources, wire.Source{URL: s.Web.URI, Title: s.Web.Title})
	}
	resp.Chain = &wire.Chain{Hops: h + 1, Searches: sp.Searches, Fetches: sp.Fetches, Citations: wire.CitationCounts(cites)}
	return resp, shown
}

// tally counts hops 0..last's fetches (the pages read) and the searches and fetches
// answered from a record (the job's, its batch's, a replayed job's), which cost
// nothing. The searches the fleet's cache or an identical search in flight answered
// are counted in their results' usage (engines.Usage.Cached).
func (v *view) tally(last int) wire.Spend {
	var sp wire.Spend
	for h := 0; h <= last; h++ {
		for _, c := range v.calls(h) {
			fetch := c.Tool == intent.FetchToolName
			switch {
			case !c.Local && fetch:
				sp.Fetches++
			case c.Recorded == "" || c.Result == nil:
				// a search that ran, or a call the fleet answered itself
			case fetch && c.Page != nil:
				sp.FetchesCached++
			case c.Tool == "" && c.Result.Citation.Error == nil:
				sp.SearchesCached++
			}
		}
	}
	return sp
}
