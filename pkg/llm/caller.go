package llm

import "context"

// Delta is one piece of a streamed answer, in the order the model wrote it.
type Delta struct {
	// Text is answer text (never reasoning, never tool-call arguments).
	Text string
}

// Caller calls a model with an OpenAI Chat Completions request body and returns its
// answer as a Chat assistant message: the form the tests written in Chat's terms drive
// the model caller in (upstreamtest.Chat over upstream.Caller, which calls every main
// model in canonical form).
type Caller interface {
	// Complete calls the model once. With onDelta set, the call streams where the
	// provider can and onDelta receives the answer's text as it arrives, in order,
	// on the calling goroutine; the Completion returned is the whole answer either
	// way. Errors are *Error values (status, retry-after) or the context's error.
	Complete(ctx context.Context, body []byte, onDelta func(Delta)) (*Completion, error)
}
