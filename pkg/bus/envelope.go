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

// Sealed is a message whose whole envelope is encoded already (Seal): Encode sends
// Envelope as it is. A message stored before it is published (a chain's search
// result) is published exactly as stored, and a reader of the stored bytes decodes
// them as it decodes the message (Decode).
type Sealed struct {
	Payload // its kind and message id
	// Envelope is the message's data, as Seal made it; it is not checked.
	Envelope []byte
}

// Seal encodes p's envelope once (see Sealed).
func Seal(p Payload) (Sealed, error) {
	id := p.MsgID()
	if id == "" {
		return Sealed{}, fmt.Errorf("bus: %s message without an id", p.Kind())
	}
	data, err := json.Marshal(envelope[Payload]{Kind: p.Kind(), ID: id, At: time.Now().UTC(), Data: p})
	if err != nil {
		return Sealed{}, fmt.Errorf("bus: encoding %s: %w", p.Kind(), err)
	}
	return Sealed{Payload: p, Envelope: data}, nil
}

// Encode builds the NATS message for p on subject: its envelope as Seal makes it, or
// as a Sealed payload holds it already.
func Encode(subject string, p Payload) (*nats.Msg, error) {
	sealed, ok := p.(Sealed)
	if !ok {
		var err error
		if sealed, err = Seal(p); err != nil {
			return nil, err
		}
	}
	m := nats.NewMsg(subject)
	m.Data = sealed.Envelope
	m.Header.Set(nats.MsgIdHdr, sealed.MsgID())
	m.Header.Set(HeaderKind, sealed.Kind())
	if e, ok := sealed.Payload.(Event); ok {
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
