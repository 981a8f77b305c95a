package responses

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Compaction (POST /v1/responses/compact) shortens a conversation without a model
// call, so it works the same for every model: the turns the client wrote (user and
// system messages) are kept as they are, and what the model and the tools produced —
// assistant text, function calls and their outputs, searches — becomes one assistant
// turn, a transcript of it in order, carried by a "compaction" item. Reasoning items
// are dropped (only the model that wrote them can read them), a tool's output and an
// earlier transcript are clipped, a search keeps its query and the pages it found.
//
// The item's encrypted_content is the transcript turn in the fleet's canonical form
// (a Message), base64url after a version prefix. It is opaque to clients but not
// secret: it holds nothing the client did not send or receive, so the fleet keeps no
// key for it and any of its processes reads it back. A later request that sends the
// item back gets the transcript turn in its place (Responses input).

// compactionPrefix starts every compaction the fleet writes (format 1).
const compactionPrefix = "sfc1."

// compactToolOutput bounds the characters of one tool output in a transcript.
const compactToolOutput = 1000

// Compaction is a conversation compacted.
type Compaction struct {
	// Kept are the client's own turns (user and system messages), in order.
	Kept []wire.Message
	// Summary is the rest, as one assistant turn.
	Summary wire.Message
}

// Compact compacts r's conversation. r.System (the input's leading system and
// developer messages; instructions are the caller's to leave out) is kept as a first
// system message. A conversation that ends with function calls still waiting for
// their output cannot be compacted: their call ids would no longer match.
func Compact(r *wire.Request) (*Compaction, error) {
	c := &Compaction{}
	if r.System != "" {
		c.Kept = append(c.Kept, wire.Message{Role: wire.RoleSystem, Parts: []wire.Part{{Kind: wire.PartText, Text: r.System}}})
	}
	open := map[string]string{} // call id → tool name, for calls without output yet
	var b strings.Builder
	b.WriteString("[Compacted conversation: what the assistant did and what its tools returned, after each of the user's messages above. Earlier reasoning and full tool outputs were dropped.]\n")
	users, heading := 0, -1
	line := func(format string, args ...any) {
		if heading != users {
			heading = users
			if users == 0 {
				b.WriteString("\nBefore the user's first message:\n")
			} else {
				fmt.Fprintf(&b, "\nAfter user message %d:\n", users)
			}
		}
		b.WriteString("- ")
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\n")
	}
	for _, m := range r.Messages {
		if m.Role == wire.RoleUser || m.Role == wire.RoleSystem {
			if m.Role == wire.RoleUser {
				users++
			}
			c.Kept = append(c.Kept, m)
			continue
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartText:
				if t := strings.TrimSpace(p.Text); t != "" {
					line("The assistant wrote: %s", wire.Clip(t, 4*compactToolOutput))
				}
			case wire.PartToolCall:
				open[p.Call.ID] = p.Call.Name
				line("The assistant called the tool %s with %s", p.Call.Name, wire.Clip(p.Call.Arguments, compactToolOutput))
			case wire.PartToolResult:
				name := open[p.Result.CallID]
				delete(open, p.Result.CallID)
				text := wire.ResultText(p.Result)
				if text == "" && len(p.Result.Parts) > 0 {
					text = "(content that is not text)"
				}
				line("The tool %s returned: %s", name, wire.Clip(text, compactToolOutput))
			case wire.PartServerCall:
				if p.Server.IsFetch() {
					line("The assistant read the page %s", p.Server.URL)
				} else {
					line("The assistant searched the web for %q", p.Server.Query)
				}
			case wire.PartServerResult:
				if p.Search.Error != nil {
					line("That search failed (%s)", p.Search.Error.Code)
					continue
				}
				var found []string
				for _, s := range p.Search.Sources {
					found = append(found, strings.TrimSpace(s.Title+" <"+s.URL+">"))
				}
				if len(found) > 0 {
					line("It found: %s", strings.Join(found, "; "))
				}
			case wire.PartImage, wire.PartFile:
				line("The assistant's turn held an image or a file, not kept")
			}
		}
	}
	for id := range open {
		return nil, wire.Invalid("input", "The conversation ends with a function_call (call_id %q) that has no function_call_output yet: send its output before compacting, so the call and its output stay together.", wire.Clip(id, 64))
	}
	c.Summary = wire.Message{Role: wire.RoleAssistant, Parts: []wire.Part{{Kind: wire.PartText, Text: strings.TrimRight(b.String(), "\n")}}}
	return c, nil
}

// EncodeCompaction is a compaction item's encrypted_content for the summary turn m.
func EncodeCompaction(m wire.Message) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	return compactionPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// DecodeCompaction reads back a compaction item's encrypted_content (param names it
// in the error): the assistant turn it stands for.
func DecodeCompaction(param, content string) (wire.Message, error) {
	bad := wire.Invalid(param, "%s is not a compaction this server wrote: send back the compaction item of POST /v1/responses/compact unchanged", param)
	data, ok := strings.CutPrefix(content, compactionPrefix)
	if !ok {
		return wire.Message{}, bad
	}
	raw, err := base64.RawURLEncoding.DecodeString(data)
	if err != nil {
		return wire.Message{}, bad
	}
	var m wire.Message
	if json.Unmarshal(raw, &m) != nil || m.Role != wire.RoleAssistant || !wire.TextOnly(m.Parts) {
		return wire.Message{}, bad
	}
	return m, nil
}

// CompactionOutput is the output of a compacted response with id: the kept turns as
// message items, then the compaction item.
func CompactionOutput(id string, c *Compaction) ([]any, error) {
	out := make([]any, 0, len(c.Kept)+1)
	for i, m := range c.Kept {
		content := responsesInputParts(m.Parts)
		if content == nil {
			content = []map[string]string{}
		}
		out = append(out, map[string]any{"type": "message", "id": fmt.Sprintf("msg_%s_%d", wire.IDToken(id), i), "status": "completed", "role": string(m.Role), "content": content})
	}
	enc, err := EncodeCompaction(c.Summary)
	if err != nil {
		return nil, err
	}
	return append(out, map[string]any{"type": "compaction", "id": "cmp_" + wire.IDToken(id), "encrypted_content": enc}), nil
}
