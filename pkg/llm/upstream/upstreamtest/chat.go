// Package upstreamtest drives an upstream.Caller with OpenAI Chat requests and answers,
// for the tests written in Chat's terms (credential rotation, each protocol's native
// search): a Chat body is read into the canonical request the chain would build, and
// the turn that comes back is rendered as a Chat assistant message with its native
// search report, as the job record keeps it.
package upstreamtest

import (
	"context"
	"encoding/json"

	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/upstream"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Chat is a caller spoken to in Chat: an llm.Caller.
type Chat struct{ *upstream.Caller }

var _ llm.Caller = Chat{}

// Complete makes the call of a Chat request body.
func (c Chat) Complete(ctx context.Context, body []byte, onDelta func(llm.Delta)) (*llm.Completion, error) {
	req, err := openaichat.Client.DecodeRequest(body)
	if err != nil {
		return nil, err
	}
	p, err := c.Prepare(req, onDelta != nil)
	if err != nil {
		return nil, err
	}
	t, err := c.Caller.Complete(ctx, p, onDelta)
	if err != nil {
		return nil, err
	}
	return Completion(t), nil
}

// Completion is a turn as a Chat completion: its assistant message with the native
// search report in llm.NativeKey.
func Completion(t *wire.Turn) *llm.Completion {
	m, finish := t.ChatMessage()
	if t.Native != nil {
		m[llm.NativeKey] = t.Native
	}
	msg, _ := json.Marshal(m)
	return &llm.Completion{Model: t.Model, Message: msg, FinishReason: finish, Usage: t.Usage}
}
