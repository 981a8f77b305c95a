package bus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// roundTrip checks Decode's promises for payload type T on data: a failure is always
// ErrUndecodable (so the message is dead-lettered, never retried); a success has the
// envelope's id, and the payload survives Encode and Decode unchanged.
func roundTrip[T bus.Payload](t *testing.T, data []byte) {
	t.Helper()
	p, info, err := bus.Decode[T](data)
	if err != nil {
		if !errors.Is(err, bus.ErrUndecodable) {
			t.Fatalf("a decode failure that is not ErrUndecodable: %v", err)
		}
		return
	}
	if info.ID == "" {
		t.Fatalf("decoded a message without an id: %s", data)
	}
	m, err := bus.Encode("x", p)
	if err != nil {
		return // a payload without an id of its own (an empty job id) is never sent
	}
	p2, _, err := bus.Decode[T](m.Data)
	if err != nil {
		t.Fatalf("re-encoded message does not decode: %v\n%s", err, m.Data)
	}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(p2)
	if !bytes.Equal(a, b) {
		t.Fatalf("payload changed in a round trip:\n%s\n%s", a, b)
	}
}

// FuzzDecode: bus.Decode never panics and keeps its promises for every message kind
// it is seeded with.
func FuzzDecode(f *testing.F) {
	for _, p := range []bus.Payload{bus.ChatJob{JobID: "job_1", Tenant: "t"}, bus.Event{JobID: "job_1", Type: bus.EventModelCall, Hop: 2, Query: "é"}} {
		m, err := bus.Encode("x", p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.Data)
	}
	for _, s := range []string{``, `null`, `{}`, `{"kind":"chat.job.v1"}`, `{"kind":"chat.job.v1","id":"x","data":null}`, `{"kind":"chat.job.v1","id":"x","data":[1]}`,
		`{"kind":"chat.job.v1","id":"x","at":"not a time","data":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip[bus.ChatJob](t, data)
		roundTrip[bus.Event](t, data)
	})
}
