package chat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// complete ends the job with hop h's answer.
func (w *Worker) complete(ctx context.Context, v *view, h int) error {
	t, _ := v.turn(h)
	srcs := nativeSources(t, v.allSources(h))
	trace, searchUsage := v.trace(h)
	trace, searchUsage = v.addNative(h, trace, searchUsage)
	spend := w.jobSpend(ctx, v, h, searchUsage)
	resp, shown := buildResponse(v, h, t, srcs, spend)
	cites := resp.Chain.Citations
	usage := chainUsage(v, h)
	resp.Usage.Spend = &spend
	answer, err := wire.EncodeAnswer(resp)
	if err != nil {
		return bus.Permanent(err)
	}
	ub, _ := json.Marshal(jobUsage{PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, TotalTokens: usage.TotalTokens,
		ModelCalls: h + 1, ModelProtocol: w.Models[v.job.Model].Protocol, Searches: spend.Searches, SearchesCached: spend.SearchesCached,
		Fetches: spend.Fetches, FetchesCached: spend.FetchesCached, SearchCostUSD: spend.SearchCostUSD,
		ModelCostUSD: spend.ModelCostUSD, CostUSD: spend.CostUSD, Citations: cites})
	if w.Metrics != nil {
		w.Metrics.Citations.WithLabelValues("valid").Add(float64(cites.Valid))
		w.Metrics.Citations.WithLabelValues("removed").Add(float64(cites.Removed))
	}
	tb, _ := json.Marshal(trace)
	if resp.Stop == wire.StopToolUse && v.chain.Sticky {
		// The client runs its tools and comes back with this conversation plus their
		// results: that request continues this chain, so it keeps web_search. Marked
		// before the job ends: the client may send that request as soon as it has the
		// answer.
		if hash, ok := conversationHash(v.job.Tenant, append(v.req.Messages[:len(v.req.Messages):len(v.req.Messages)], shown)); ok {
			if err := w.Store.MarkStickyConversation(ctx, hash, w.StickyTTL); err != nil {
				return err
			}
		}
	}
	end := jobs.Ending{Status: state.Completed, Hop: h, Response: answer, Usage: ub, Trace: tb}
	u := v.unsaved
	if u == nil || u.hop != h {
		return w.end(ctx, v.job.ID, end)
	}
	// The answer (answered) is stored with the ending, in one write. It is paid for:
	// the ending rides out a Redis restart as storeTurn does.
	end.Turn, v.unsaved = u.b, nil
	return state.Persist(ctx, min(w.LeaseTTL/2, 15*time.Second), func() error {
		err := w.end(ctx, v.job.ID, end)
		if errors.Is(err, state.ErrAnswerStood) || errors.Is(err, jobs.ErrUnknownJob) {
			// Another worker's answer stands (the step is retried from it), or the job
			// is gone: trying again cannot help.
			return backoff.Permanent(err)
		}
		return err
	})
}

// jobUsage is a completed job's usage record (the job's "usage" field): its fields in
// name order, the order the map it was encoded from before wrote them in, so the
// record's bytes are as they were; the counts of cached searches and of fetches are
// left out when they are 0. Its spend fields are usage.searchfleet's.
type jobUsage struct {
	Citations        wire.CitationCounts `json:"citations"`
	CompletionTokens int                 `json:"completion_tokens"`
	CostUSD          float64             `json:"cost_usd"`
	Fetches          int                 `json:"fetches,omitempty"`
	FetchesCached    int                 `json:"fetches_cached,omitempty"`
	ModelCalls       int                 `json:"model_calls"`
	ModelCostUSD     float64             `json:"model_cost_usd"`
	ModelProtocol    string              `json:"model_protocol"`
	PromptTokens     int                 `json:"prompt_tokens"`
	SearchCostUSD    float64             `json:"search_cost_usd"`
	Searches         int                 `json:"searches"`
	SearchesCached   int                 `json:"searches_cached,omitempty"`
	TotalTokens      int                 `json:"total_tokens"`
}

func chainUsage(v *view, last int) llm.Usage {
	var u llm.Usage
	for h := 0; h <= last; h++ {
		if t, ok := v.turn(h); ok {
			u.Add(t.Usage)
		}
	}
	return u
}

// conversationHash identifies a tenant's conversation by its messages' roles, text
// and tool call ids (not their form: one assistant turn reads as one message whether a
// protocol splits it or not, and reasoning does not count). The tenant is part of it:
// one tenant's conversation never makes another's sticky.
func conversationHash(tenant string, msgs []wire.Message) (string, bool) {
	if len(msgs) == 0 {
		return "", false
	}
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{3})
	for i, m := range msgs {
		if i > 0 && m.Role != msgs[i-1].Role {
			h.Write([]byte{1})
		}
		if i == 0 || m.Role != msgs[i-1].Role {
			h.Write([]byte(m.Role))
			h.Write([]byte{0})
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case wire.PartText:
				h.Write([]byte(p.Text))
			case wire.PartToolCall:
				h.Write([]byte{0})
				h.Write([]byte(p.Call.ID))
				h.Write([]byte{0})
			case wire.PartToolResult:
				h.Write([]byte{0})
				h.Write([]byte(p.Result.CallID))
				h.Write([]byte{0})
				for _, rp := range p.Result.Parts {
					h.Write([]byte(rp.Text))
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), true
}

// continuedConversation returns the hash of a request's conversation up to its last
// assistant message: the key under which an earlier answer marked the chain sticky.
func continuedConversation(tenant string, msgs []wire.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == wire.RoleAssistant {
			return conversationHash(tenant, msgs[:i+1])
		}
	}
	return "", false
}
