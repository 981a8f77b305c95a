package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/searchfleet/searchfleet/internal/demo"
)

// Two search worker processes serving the same engine share its work, and killing
// one mid-run (SIGKILL: nothing acknowledged, nothing drained) loses no job.
func TestSearchWorkersShareWorkAndSurviveKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startIngress()
	c.start("chatworker", "chatworker")
	a := c.start("searchworker-a", "searchworker", "FLEET_ENGINES=brave", "FLEET_SEARCH_CONCURRENCY=4")
	b := c.start("searchworker-b", "searchworker", "FLEET_ENGINES=brave", "FLEET_SEARCH_CONCURRENCY=4")
	const n = 24
	ids := make([]string, n)
	for i := range ids {
		ids[i] = c.submit(fmt.Sprintf("Search the web: news item %d? sim:engine=brave sim:slow=400ms", i))
	}
	// Kill A once both have finished searches, while it holds more in flight.
	c.eventually("several searches done", func() bool { return c.sim.Stats().Requests["brave"] >= 14 })
	a.kill()
	workers := map[string]int{}
	for _, id := range ids {
		j := c.waitDone(id)
		if got := answer(t, j); !strings.Contains(got, "[1]") {
			t.Errorf("job %s answer does not cite: %q", id, got)
		}
		for _, e := range traceOf(t, j) {
			if e.Error != "" {
				t.Errorf("job %s search failed: %s", id, e.Error)
			}
			workers[e.Worker]++
		}
	}
	if workers[a.workerID()] == 0 || workers[b.workerID()] == 0 {
		t.Fatalf("searches by worker: %v; want both %s and %s", workers, a.workerID(), b.workerID())
	}
	t.Logf("searches by worker after killing %s: %v", a.workerID(), workers)
}

// cupQuote is what an answer to "Search the web: who won the 2022 world cup?" quotes
// from the simulator's first page: its search results are made from the query.
const cupQuote = "who won the 2022 world cup, simulated result 1 of 5."

// Killing the chat worker between the model's tool call and the search result does
// not lose the job: another worker finishes it, and the simulator saw each model call
// and each search exactly once.
func TestChatWorkerKilledBetweenToolCallAndResult(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startIngress()
	c.start("searchworker", "searchworker", "FLEET_ENGINES=google")
	first := c.start("chatworker-1", "chatworker")
	id := c.submit("Search the web: who won the 2022 world cup? sim:slow=2s")
	c.eventually("the search running", func() bool { return c.sim.Stats().Requests["gemini"] == 1 })
	first.kill()
	c.start("chatworker-2", "chatworker")
	if got := answer(t, c.waitDone(id)); !strings.Contains(got, "[1]") || !strings.Contains(got, cupQuote) {
		t.Fatalf("answer does not cite a page about the question: %q", got)
	}
	st := c.sim.Stats()
	if st.Requests["model"] != 2 || st.Requests["gemini"] != 1 || st.Duplicates["model"] != 0 || st.Duplicates["gemini"] != 0 {
		t.Fatalf("simulator saw %v, duplicates %v; want 2 model calls and 1 search, none repeated", st.Requests, st.Duplicates)
	}
}

// A chat worker that dies at each point of a step (failpoints) leaves the job to the
// next worker. Once the model's answer is stored, no paid call is repeated; a crash
// after the model answered but before the answer was stored is the one window where
// the model is asked again.
func TestChatWorkerCrashPoints(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		point      string
		modelCalls int64
	}{
		{"chat.after_turn_stored", 2},
		{"chat.after_dispatch", 2},
		{"chat.after_model_call", 3},
	} {
		t.Run(c.point, func(t *testing.T) {
			t.Parallel()
			cl := newCluster(t)
			cl.startIngress()
			cl.start("searchworker", "searchworker", "FLEET_ENGINES=google")
			crashing := cl.start("chatworker-crashing", "chatworker", "FLEET_FAILPOINT="+c.point)
			id := cl.submit("Search the web: who won the 2022 world cup?")
			cl.eventually("the failpoint", crashing.exited)
			if code := crashing.cmd.ProcessState.ExitCode(); code != 3 {
				t.Fatalf("crashing worker exited %d, want the failpoint's 3", code)
			}
			cl.start("chatworker-2", "chatworker")
			if got := answer(t, cl.waitDone(id)); !strings.Contains(got, cupQuote) {
				t.Errorf("answer does not quote a page about the question: %q", got)
			}
			st := cl.sim.Stats()
			if st.Requests["model"] != c.modelCalls || st.Requests["gemini"] != 1 || st.Duplicates["gemini"] != 0 {
				t.Fatalf("simulator saw %v (duplicates %v); want %d model calls and 1 search", st.Requests, st.Duplicates, c.modelCalls)
			}
		})
	}
}

// SIGTERM drains: the step in flight finishes (its model call is not repeated by
// anyone), the process exits cleanly, and the job completes on the next worker.
func TestChatWorkerGracefulDrain(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startIngress()
	c.start("searchworker", "searchworker", "FLEET_ENGINES=google")
	w := c.start("chatworker-1", "chatworker")
	id := c.submit("Search the web: who won the 2022 world cup? sim:model-slow=1500ms")
	c.eventually("the model call running", func() bool { return c.sim.Stats().Requests["model"] == 1 })
	if err := w.term(t); err != nil {
		t.Fatalf("chat worker exit after SIGTERM: %v\n%s", err, w.out.String())
	}
	c.start("chatworker-2", "chatworker")
	if got := answer(t, c.waitDone(id)); !strings.Contains(got, cupQuote) {
		t.Errorf("answer does not quote a page about the question: %q", got)
	}
	if st := c.sim.Stats(); st.Duplicates["model"] != 0 || st.Requests["model"] != 2 {
		t.Fatalf("simulator saw %v (duplicates %v)", st.Requests, st.Duplicates)
	}
}

// The official OpenAI SDK works unchanged: a chat completion with url_citation
// annotations, a streamed one, and errors as *openai.Error with the right status.
func TestOpenAISDK(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startIngress()
	c.start("chatworker", "chatworker")
	c.start("searchworker", "searchworker")
	client := openai.NewClient(option.WithBaseURL(c.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	params := openai.ChatCompletionNewParams{
		Model:    demo.Model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Search the web: who won the 2022 world cup?")},
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if !strings.Contains(msg.Content, "[1]") || !strings.Contains(msg.Content, cupQuote) || len(msg.Annotations) == 0 ||
		!strings.HasPrefix(msg.Annotations[0].URLCitation.URL, "https://") || !strings.Contains(msg.Annotations[0].URLCitation.URL, "/search-the-web-who-won-the-2022-world-cup") {
		t.Fatalf("content %q annotations %+v", msg.Content, msg.Annotations)
	}
	if resp.Usage.TotalTokens == 0 || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("usage %+v finish %q", resp.Usage, resp.Choices[0].FinishReason)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 || acc.Choices[0].Message.Content != msg.Content {
		t.Fatalf("streamed %d chunks, content %q, want %q", chunks, acc.Choices[0].Message.Content, msg.Content)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "no-such-model", Messages: params.Messages})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("unknown model: %v", err)
	}
}
