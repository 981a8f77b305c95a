package ingress_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// streamAPI is an ingress with no workers, on a real embedded NATS and the real
// Redis: the test plays the chat worker on the job's live subject and ends the job.
func streamAPI(t *testing.T) (*httptest.Server, *bus.Bus, *jobs.Ender) {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	store := state.New(rdb, prefix, time.Hour)
	ender := jobs.NewEnder(store.Jobs, b, nil, nil)
	s := ingress.New(ingress.Options{Bus: b, Store: ingress.StoreOf(store), Models: []string{"m1"}, MaxBody: 1 << 20, Log: slog.New(slog.DiscardHandler),
		JobTimeout: time.Minute, SyncWait: 30 * time.Second, Ender: ender})
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs, b, ender
}

// chunkTexts reads a Chat event stream to [DONE] and returns each content delta, in
// order; it closes first at the first one. It may run on a goroutine of its own.
func chunkTexts(t *testing.T, sc *bufio.Scanner, first chan<- struct{}) []string {
	t.Helper()
	var out []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return out
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Errorf("chunk %s: %v", data, err)
			return out
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			out = append(out, c.Choices[0].Delta.Content)
			if first != nil {
				close(first)
				first = nil
			}
		}
	}
	t.Errorf("stream ended without [DONE]: %v", sc.Err())
	return out
}

// Two attempts of one hop (a worker died mid-stream, another re-ran the model call)
// publish overlapping deltas: the client gets every character once, in order, with the
// second attempt's repeat of what it already has dropped and only its new suffix
// forwarded; a delta after a gap and a delta of an earlier hop are not relayed; the
// stored answer then completes the text exactly.
func TestStreamDedupesReRunHop(t *testing.T) {
	t.Parallel()
	hs, b, ender := streamAPI(t)
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m1","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	job := resp.Header.Get("X-Searchfleet-Job-Id")
	if resp.StatusCode != 200 || job == "" {
		t.Fatalf("status %d, job %q", resp.StatusCode, job)
	}
	final := "The quick brown fox jumps over the lazy dog."
	pub := func(hop int, attempt string, offset int, text string) {
		t.Helper()
		m := bus.StreamMsg{JobID: job, Type: bus.StreamDelta, Hop: hop, Attempt: attempt, Offset: offset, Text: text}
		if err := b.Emit(bus.SubjectStream(job), m); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	got := make(chan []string, 1)
	first := make(chan struct{})
	go func() { got <- chunkTexts(t, sc, first) }()

	pub(1, "w1.a", 0, "The quick ")
	<-first // relayed before the job ends
	pub(1, "w1.a", 10, "brown fox ")
	// w1 dies; w2 re-runs hop 1 from the start.
	pub(1, "w2.b", 0, "The quick brown ")
	pub(1, "w2.b", 16, "fox jumps ")
	pub(1, "w1.a", 20, "jump")                // the first attempt's late delta: already shown
	pub(1, "w3.c", 30, "lazy")                // an attempt seen only past a gap: not relayed
	pub(0, "w0.z", 0, "a preamble of hop 0 ") // an earlier hop: not relayed
	pub(1, "w2.b", 26, "over the ")
	answer, _ := wire.EncodeAnswer(&wire.Response{ID: "chatcmpl-" + job, Model: "m1", Created: time.Unix(1, 0).UTC(), Status: wire.StatusCompleted,
		Stop: wire.StopEndTurn, Content: []wire.Part{{Kind: wire.PartText, Text: final}}, Usage: wire.Usage{InputTokens: 3, OutputTokens: 9}})
	if err := ender.End(context.Background(), job, jobs.Ending{Status: state.Completed, Hop: 1, Response: answer}); err != nil {
		t.Fatal(err)
	}
	var texts []string
	select {
	case texts = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end")
	}
	want := []string{"The quick ", "brown fox ", "jumps ", "over the ", "lazy dog."}
	if strings.Join(texts, "") != final {
		t.Fatalf("client text %q, want %q", strings.Join(texts, ""), final)
	}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("deltas %q, want %q", texts, want)
	}
}
