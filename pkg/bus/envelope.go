package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Payload is a message body type. Its kind is a stable, versioned string
// ("search.request.v1") that never changes meaning; a new shape is a new kind. Its
// message id is deterministic — the same logical message always has the same id — and
// is sent as Nats-Msg-Id, so a republished step is dropped by the stream's duplicate
// window instead of running twice.
type Payload interface {
	Kind() string
	MsgID() string
}

// Header names.
const (
	HeaderKind = "Fleet-Kind"
	// HeaderEvent carries an event's type, so a watcher can spot the terminal event
	// without decoding every one.
	HeaderEvent = "Fleet-Event"
	// DLQ headers, set on dead letters.
	HeaderDLQReason   = "Fleet-Dlq-Reason"
	HeaderDLQSubject  = "Fleet-Dlq-Subject"
	HeaderDLQStream   = "Fleet-Dlq-Stream"
	HeaderDLQConsumer = "Fleet-Dlq-Consumer"
	HeaderDLQDeliver  = "Fleet-Dlq-Deliveries"
	HeaderDLQSeq      = "Fleet-Dlq-Stream-Seq"
)

// envelope is the wire form of every message: kind, id and time around the payload.
type envelope[T any] struct {
	Kind string    `json:"kind"`
	ID   string    `json:"id"`
	At   time.Time `json:"at"`
	Data T         `json:"data"`
}

// Encode builds the NATS message for p on subject.
func Encode(subject string, p Payload) (*nats.Msg, error) {
	id := p.MsgID()
	if id == "" {
		return nil, fmt.Errorf("bus: %s message without an id", p.Kind())
	}
	data, err := json.Marshal(envelope[Payload]{Kind: p.Kind(), ID: id, At: time.Now().UTC(), Data: p})
	if err != nil {
		return nil, fmt.Errorf("bus: encoding %s: %w", p.Kind(), err)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(nats.MsgIdHdr, id)
	m.Header.Set(HeaderKind, p.Kind())
	if e, ok := p.(Event); ok {
		m.Header.Set(HeaderEvent, string(e.Type))
	}
	return m, nil
}

// ErrUndecodable marks a message that can never be handled: not JSON, the wrong kind,
// or no id. It is dead-lettered at once and never retried.
var ErrUndecodable = errors.New("undecodable message")

// Decode reads a message of kind T. Any failure wraps ErrUndecodable.
func Decode[T Payload](data []byte) (T, envelopeInfo, error) {
	var env envelope[T]
	var zero T
	if err := json.Unmarshal(data, &env); err != nil {
		return zero, envelopeInfo{}, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if want := zero.Kind(); env.Kind != want {
		return zero, envelopeInfo{}, fmt.Errorf("%w: kind %q, want %q", ErrUndecodable, env.Kind, want)
	}
	if env.ID == "" {
		return zero, envelopeInfo{}, fmt.Errorf("%w: no id", ErrUndecodable)
	}
	return env.Data, envelopeInfo{ID: env.ID, At: env.At}, nil
}

// envelopeInfo is what the envelope says besides the payload.
type envelopeInfo struct {
	ID string
	At time.Time
}
