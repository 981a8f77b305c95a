package search

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// A call's stored outcome is read in its form: a chain's resume message
// (SaveSearchResult), republished as stored; a direct search's Done alone. Anything
// else is not an outcome.
func TestStoredDoneReadsBothForms(t *testing.T) {
	t.Parallel()
	want := Done{JobID: "j", Hop: 1, CallID: "c", Engine: "brave"}
	bare, _ := json.Marshal(want)
	sealed, err := bus.Seal(want)
	if err != nil {
		t.Fatal(err)
	}
	if d, msg, ok := storedDone(sealed.Envelope, false); !ok || d.CallID != "c" || !bytes.Equal(msg, sealed.Envelope) {
		t.Fatalf("a resume message: %+v %s %v", d, msg, ok)
	}
	if _, _, ok := storedDone(bare, false); ok {
		t.Fatal("a chain's call read a bare Done as its resume message")
	}
	if d, msg, ok := storedDone(bare, true); !ok || d.Engine != "brave" || !bytes.Equal(msg, bare) {
		t.Fatalf("a direct search's outcome: %+v %s %v", d, msg, ok)
	}
	if _, _, ok := storedDone([]byte(`not json`), false); ok {
		t.Fatal("garbage read as an outcome")
	}
}
