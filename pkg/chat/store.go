package chat

import (
	"context"
	"encoding/json"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// ChainStore is the state a chat worker keeps between steps: a job, its chain, the
// leases of its hops. *state.Store is the Redis one, and pkg/state's
// chain_conformance_test.go is the conformance suite it passes, on Redis and over
// miniredis (the unit tests'). Every
// write the chain relies on is first-write-wins or counted once, so any step may be
// replayed.
type ChainStore interface {
	// LoadStep reads a job and its chain and, with claim, claims the claimed hop's
	// lease, in one round trip. A missing job is state.ErrNotFound.
	LoadStep(ctx context.Context, id string, claim *state.Claim) (*state.Step, error)
	// RecordAndLoad records the result of call of hop h once (counting it once) and
	// reads the job and chain after it, in one round trip; the result that completes
	// the hop claims hop h+1's lease for owner.
	RecordAndLoad(ctx context.Context, id string, h int, call string, result []byte, owner string, ttl time.Duration) (*state.Step, error)
	// RecordResult records a result like RecordAndLoad, reading nothing back, and
	// returns the hop's counts (calls answered at dispatch).
	RecordResult(ctx context.Context, id string, h int, call string, result []byte) (have, want int, err error)
	// SaveTurn stores hop h's model answer unless one is stored and returns the stored
	// one; on hop 0 it also sets the chain's flags and marks a queued job running
	// (later hops keep both).
	SaveTurn(ctx context.Context, id string, h int, turn []byte, sticky, googlePreferred bool) (json.RawMessage, error)
	// SaveCalls records hop h's calls once: how many results it waits for, how many
	// searches it adds to the job's count. It makes the chain sticky and returns the
	// job's status.
	SaveCalls(ctx context.Context, id string, h int, calls []byte, expected, searches int) (state.Status, error)
	// SaveTurnAndCalls is SaveTurn then SaveCalls in one round trip, for an answer
	// that dispatches calls; it returns the job's status and the stored answer. When
	// another answer was stored first, that one is returned and the calls are not
	// recorded (they were planned from an answer that does not stand).
	SaveTurnAndCalls(ctx context.Context, id string, h int, turn []byte, sticky, googlePreferred bool, calls []byte, expected, searches int) (state.Status, json.RawMessage, error)
	// KeepHop keeps owner's lease of hop h alive until the returned function is
	// called; with drop set, that also frees the lease at once.
	KeepHop(id string, h int, owner string, ttl time.Duration) func(drop bool)

	// StickyConversation reports whether a conversation continues a web_search chain;
	// MarkStickyConversation records that one does, for ttl.
	StickyConversation(ctx context.Context, hash string) (bool, error)
	MarkStickyConversation(ctx context.Context, hash string, ttl time.Duration) error
}

// Publisher puts the chain's messages on the bus. *bus.Bus is the NATS one.
type Publisher interface {
	// Publish publishes and waits for the stream to store the message.
	Publish(ctx context.Context, subject string, p bus.Payload) error
	// PublishAsync publishes without waiting; bus.Wait collects the acknowledgements.
	PublishAsync(ctx context.Context, subject string, p bus.Payload) (bus.Pending, error)
	// Emit publishes a progress event without waiting for the stream.
	Emit(subject string, p bus.Payload) error
}

var (
	_ ChainStore = (*state.Chains)(nil)
	_ Publisher  = (*bus.Bus)(nil)
)
