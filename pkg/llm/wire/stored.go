package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// StoredFormat is the format version of a job's stored request: the canonical
// Request with the protocol the client spoke.
const StoredFormat = 2

// Stored is a job's request as the fleet keeps it: decoded once from the client's
// protocol at the ingress, read by the chat worker at each step.
type Stored struct {
	Format int `json:"format"`
	// Protocol is the protocol the client spoke: the ingress answers in it.
	Protocol Protocol `json:"protocol"`
	Request  *Request `json:"request"`
}

// EncodeStored is req, which the client sent in protocol p, as a job stores it.
func EncodeStored(p Protocol, req *Request) (json.RawMessage, error) {
	return marshalStored(&Stored{Format: StoredFormat, Protocol: p, Request: req})
}

// DecodeStored reads a job's stored request.
func DecodeStored(b []byte) (*Stored, error) {
	var s Stored
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	if s.Format != StoredFormat {
		return nil, fmt.Errorf("stored request of unknown format %d", s.Format)
	}
	if s.Request == nil {
		return nil, fmt.Errorf("stored request of format %d has no request", s.Format)
	}
	return &s, nil
}

// AddSearch merges o into the request's search settings.
func (r *Request) AddSearch(o *llm.SearchOptions) { r.Search = r.Search.With(o) }

// ToolNames are the names of the request's client tools.
func (r *Request) ToolNames() []string {
	out := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		out[i] = t.Name
	}
	return out
}

// LatestUserText is the text of the conversation's latest user message (what the
// intent classifier reads, as earlier turns already had their chance and the sticky
// flag carries an intent through the hops of one chain, and what a job listing shows);
// "" when it has none. A user message that holds only tool results is not a user turn.
func LatestUserText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != RoleUser {
			continue
		}
		parts := msgs[i].Parts
		var b strings.Builder
		text := false
		for _, p := range parts {
			if p.Kind == PartText {
				if text {
					b.WriteByte('\n')
				}
				b.WriteString(p.Text)
				text = true
			}
		}
		onlyResults := len(parts) > 0 && !slices.ContainsFunc(parts, func(p Part) bool { return p.Kind != PartToolResult })
		if text || !onlyResults {
			return b.String()
		}
	}
	return ""
}
