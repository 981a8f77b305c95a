package llm

import (
	"errors"
	"strings"
	"testing"
)

func TestReadSSE(t *testing.T) {
	in := ": comment\n\nevent: message_start\ndata: {\"a\":1}\n\ndata: line1\ndata: line2\n\ndata: [DONE]\n" // no final blank line
	type ev struct{ name, data string }
	var got []ev
	err := ReadSSE(strings.NewReader(in), func(name string, data []byte) error {
		got = append(got, ev{name, string(data)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []ev{{"message_start", `{"a":1}`}, {"", "line1\nline2"}, {"", "[DONE]"}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: got %q, want %q", i, got[i], want[i])
		}
	}
	stop := errors.New("stop")
	if err := ReadSSE(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(string, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: got %v", err)
	}
}
