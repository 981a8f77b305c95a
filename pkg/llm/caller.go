package llm

import "context"

// Delta is one piece of a streamed answer, in the order the model wrote it.
type Delta struct {
	// Text is answer text (never reasoning, never tool-call arguments).
	Text string
}

// Caller calls a main model. The chain speaks OpenAI Chat Completions internally:
// body is a Chat Completions request and the answer comes back as a Chat assistant
// message, whatever protocol the provider speaks (upstream.Caller translates both
// ways with the model codecs of pkg/llm/wire, Chat's included).
type Caller interface {
	// Complete calls the model once. With onDelta set, the call streams where the
	// provider can and onDelta receives the answer's text as it arrives, in order,
	// on the calling goroutine; the Completion returned is the whole answer either
	// way. Errors are *Error values (status, retry-after) or the context's error.
	Complete(ctx context.Context, body []byte, onDelta func(Delta)) (*Completion, error)
}

var _ Caller = (*Client)(nil)
