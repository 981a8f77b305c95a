package ingress

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// reads counts the HMGETs of job records a client sends (GetJob's read).
type reads struct{ n atomic.Int64 }

func (r *reads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *reads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hmget" {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *reads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// noHandoff is the event log without the handoff: an Ender over it ends jobs as
// before, handing no ingress the ended job (its ingress reads Redis).
type noHandoff struct{ jobs.Events }

// handoffRig is an ingress with no workers on a real embedded NATS and the real
// Redis, whose store counts its job reads; the test plays the worker that ends each
// job, with an Ender that hands ended jobs over and one that does not.
type handoffRig struct {
	s             *Server
	b             *bus.Bus
	store         *state.Store // the workers' (its reads are not counted)
	reads         *reads
	handing, none *jobs.Ender
}

func newHandoffRig(t *testing.T) *handoffRig {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	ingressRDB, err := state.NewClient(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ingressRDB.Close() })
	r := &reads{}
	ingressRDB.AddHook(r)
	store := state.New(rdb, prefix, time.Hour)
	s := New(Options{Bus: b, Store: StoreOf(state.New(ingressRDB, prefix, time.Hour)), Models: []string{"m1"}, MaxBody: 4 << 20,
		Log: slog.New(slog.DiscardHandler), JobTimeout: time.Minute, SyncWait: 30 * time.Second})
	return &handoffRig{s: s, b: b, store: store, reads: r,
		handing: jobs.NewEnder(store.Jobs, b, nil, nil), none: jobs.NewEnder(store.Jobs, noHandoff{b}, nil, nil)}
}

// chatAnswer is a stored answer of text.
func chatAnswer(text string) json.RawMessage {
	b, _ := wire.EncodeAnswer(&wire.Response{ID: "x", Model: "m1", Created: time.Unix(1, 0).UTC(), Status: wire.StatusCompleted, Stop: wire.StopEndTurn,
		Content: []wire.Part{{Kind: wire.PartText, Text: text}}, Usage: wire.Usage{InputTokens: 3, OutputTokens: 9}})
	return b
}

// A job handed over by the worker that ended it is the job Redis holds, and renders
// byte for byte as the job read from Redis does, in each client protocol: the
// waiter takes it without a read of Redis.
func TestHandedJobRendersAsTheJobReadFromRedis(t *testing.T) {
	t.Parallel()
	r := newHandoffRig(t)
	ctx := t.Context()
	for _, c := range []struct {
		codec wire.ClientCodec
		body  string
	}{
		{openaichat.Client, `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`},
		{responses.Client, `{"model":"m1","input":"hi"}`},
		{anthropic.Client, `{"model":"m1","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		codec, protocol := c.codec, c.codec.Protocol()
		req, err := codec.DecodeRequest([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		stored, err := wire.EncodeStored(protocol, req)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		job := &state.Job{ID: state.NewID("job_"), Kind: "chat", Model: "m1", Request: stored, Question: "hi", Created: now, Deadline: now.Add(time.Minute)}
		wt, err := r.s.watch(job.ID)
		if err != nil {
			t.Fatal(err)
		}
		job.Ingress = wt.ingress
		if job.Ingress == "" {
			t.Fatal("the ingress has no token")
		}
		if err := r.store.Jobs.CreateJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		before := r.reads.n.Load()
		if err := r.handing.End(ctx, job.ID, jobs.Ending{Status: state.Completed, Hop: 1, Response: chatAnswer("The answer [1]."),
			Usage: json.RawMessage(`{"searches":0,"cost_usd":0}`), Request: stored}); err != nil {
			t.Fatal(err)
		}
		handed, err := wt.wait(ctx, r.s, job.ID, 10*time.Second, nil)
		wt.stop()
		if err != nil {
			t.Fatal(err)
		}
		if wt.ended.Load() == nil || r.reads.n.Load() != before {
			t.Fatalf("%s: the job was read from Redis (%d reads), not handed over", protocol, r.reads.n.Load()-before)
		}
		read, err := r.store.Jobs.GetJob(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(handed, read) {
			t.Fatalf("%s: handed over %+v\nRedis holds %+v", protocol, handed, read)
		}
		render := func(j *state.Job) string {
			resp, e := answerOf(j, req, protocol)
			if e != nil {
				t.Fatal(e)
			}
			b, err := codec.EncodeResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if a, b := render(handed), render(read); a != b {
			t.Fatalf("%s: the handed job renders\n%s\nthe job read from Redis\n%s", protocol, a, b)
		}
	}
}

// Handed over or not (a message lost, or too large for the connection), a
// synchronous answer is the same, in each client protocol: only the handed-over one
// is answered without reading the job from Redis.
func TestSyncAnswerWithAndWithoutTheHandoff(t *testing.T) {
	t.Parallel()
	r := newHandoffRig(t)
	hs := httptest.NewServer(r.s.Handler())
	t.Cleanup(hs.Close)
	queued, err := r.b.SubscribeSync(bus.SubjectEventsAll)
	if err != nil {
		t.Fatal(err)
	}
	// ask sends a synchronous request and ends its job with ender, answering text.
	ask := func(path, body string, ender *jobs.Ender, text string) (answer string, reads int64) {
		t.Helper()
		out := make(chan string, 1)
		go func() {
			resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				out <- ""
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %d %s", path, resp.StatusCode, b)
			}
			out <- string(b)
		}()
		var id string
		for id == "" {
			m, err := queued.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ev, _, err := bus.Decode[bus.Event](m.Data); err == nil && ev.Type == bus.EventQueued {
				id = ev.JobID
			}
		}
		// The worker holds the request it read (LoadStep: no HMGET).
		st, err := r.store.Chains.LoadStep(t.Context(), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := r.reads.n.Load()
		if err := ender.End(t.Context(), id, jobs.Ending{Status: state.Completed, Hop: 1, Response: chatAnswer(text), Request: st.Job.Request}); err != nil {
			t.Fatal(err)
		}
		a := <-out
		// The job's id and times are its own: the rest is compared.
		a = strings.ReplaceAll(a, id, "JOB")
		a = regexp.MustCompile(`"(created|created_at|completed_at)":\d+`).ReplaceAllString(a, `"$1":0`)
		return a, r.reads.n.Load() - before
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/responses", `{"model":"m1","input":"hi"}`},
		{"/v1/messages", `{"model":"m1","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		handed, n := ask(c.path, c.body, r.handing, "The answer.")
		if n != 0 {
			t.Errorf("%s: %d job reads with the handoff, want 0", c.path, n)
		}
		read, n := ask(c.path, c.body, r.none, "The answer.")
		if n < 1 {
			t.Errorf("%s: %d job reads without the handoff, want the fallback's", c.path, n)
		}
		if handed != read || !strings.Contains(handed, "The answer.") {
			t.Errorf("%s: answered\n%s\nwith the handoff,\n%s\nwithout", c.path, handed, read)
		}
	}
	// An answer larger than the connection may publish is not handed over: the
	// ingress reads it.
	big := strings.Repeat("long ", int(r.b.RawConn().MaxPayload())/5+1)
	a, n := ask("/v1/chat/completions", `{"model":"m1","messages":[{"role":"user","content":"hi"}]}`, r.handing, big)
	if n < 1 || !strings.Contains(a, big) {
		t.Errorf("an oversized answer: %d job reads, %d bytes answered", n, len(a))
	}
}

// A job handed over that nobody waits for (its client left) is dropped at the next
// event, as the waiter that leaves drops everything else.
func TestHandedJobNobodyWaitsForIsDropped(t *testing.T) {
	t.Parallel()
	r := newHandoffRig(t)
	wt, err := r.s.watch("job_other")
	if err != nil {
		t.Fatal(err)
	}
	defer wt.stop()
	token := wt.ingress
	if sent, err := r.b.SendEnded(token, "job_gone", []byte{1}); err != nil || !sent {
		t.Fatal(sent, err)
	}
	if err := r.b.EmitEvent(bus.Event{JobID: "job_other", Type: bus.EventModelCall}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wt.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	r.s.events.mu.Lock()
	n, _, _ := r.s.events.ended.Pending()
	r.s.events.mu.Unlock()
	if n != 0 || wt.ended.Load() != nil || r.s.events.registered() != 1 {
		t.Fatalf("%d handed jobs pending, the other job's waiter got one: %v", n, wt.ended.Load() != nil)
	}
}
