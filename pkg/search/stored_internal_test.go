package search

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// A call's stored outcome is read in either form: a chain's resume message
// (SaveSearchResult), republished as stored; or the Done alone (a direct search's, or
// a chain's stored by an earlier release), which a chain's call seals into its
// message. Anything else is not an outcome.
func TestStoredDoneReadsBothForms(t *testing.T) {
	t.Parallel()
	want := Done{JobID: "j", Hop: 1, CallID: "c", Engine: "brave"}
	bare, _ := json.Marshal(want)
	sealed, err := bus.Seal(bus.Encoded{Payload: want, Data: bare})
	if err != nil {
		t.Fatal(err)
	}
	if d, msg, ok := storedDone(sealed.Envelope, false); !ok || d.CallID != "c" || !bytes.Equal(msg, sealed.Envelope) {
		t.Fatalf("a resume message: %+v %s %v", d, msg, ok)
	}
	d, msg, ok := storedDone(bare, false)
	if !ok || d.JobID != "j" {
		t.Fatalf("an earlier release's outcome: %+v %v", d, ok)
	}
	if got, _, err := bus.Decode[Done](msg); err != nil || got.JobID != "j" || got.Hop != 1 || got.CallID != "c" {
		t.Fatalf("an earlier release's outcome is published as %s (%v)", msg, err)
	}
	if d, msg, ok := storedDone(bare, true); !ok || d.Engine != "brave" || !bytes.Equal(msg, bare) {
		t.Fatalf("a direct search's outcome: %+v %s %v", d, msg, ok)
	}
	if _, _, ok := storedDone([]byte(`not json`), false); ok {
		t.Fatal("garbage read as an outcome")
	}
}
