package fleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/bus"
)

// /events streams leave nothing behind: after many streams on a running job are
// opened and dropped, and many are read to the end on a finished job, the process's
// goroutines and the EVENTS stream's consumers return to where they were. (Not
// parallel: it counts the process's goroutines.)
func TestEventsStreamsLeaveNothingBehind(t *testing.T) {
	f := fleettest.Start(t)
	nc, err := nats.Connect(f.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	consumers := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, bus.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	// open opens a job's event stream and waits for its first event.
	open := func(id string) (*http.Response, *bufio.Reader) {
		resp, err := client.Get(f.URL + "/v1/jobs/" + id + "/events")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("stream refused: %d %s", resp.StatusCode, b)
		}
		br := bufio.NewReader(resp.Body)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before its first event: %v", err)
			}
			if strings.HasPrefix(l, "event: ") {
				return resp, br
			}
		}
	}

	// A job that stays running: its model call is refused with a long Retry-After.
	f.Sim.SetFault("/v1/chat", 429, 30*time.Second, 0)
	status, body, _ := f.Do(t, "POST", "/v1/jobs", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if status != 202 {
		t.Fatalf("submit: %d %s", status, body)
	}
	var job struct{ ID string }
	if err := json.Unmarshal(body, &job); err != nil || job.ID == "" {
		t.Fatalf("submit: %s", body)
	}
	id := job.ID
	baseConsumers := consumers()
	resp, _ := open(id) // warm up: the first stream's one-time costs are not a leak
	resp.Body.Close()
	tr.CloseIdleConnections()
	fleettest.Eventually(t, "the warm-up stream's consumer to be deleted", func() bool { return consumers() == baseConsumers })
	runtime.GC()
	baseGoroutines := runtime.NumGoroutine()

	const n = 500 // as many as a flood of watchers opened in a probe
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := open(id)
			resp.Body.Close()
		}()
	}
	wg.Wait()

	if status, body, _ := f.Do(t, "POST", "/v1/jobs/"+id+"/cancel", nil); status != 200 {
		t.Fatalf("cancel: %d %s", status, body)
	}
	f.Sim.Reset()
	for range n {
		resp, br := open(id)
		for {
			if _, err := br.ReadString('\n'); err != nil {
				break // read to the end: the terminal event ends the stream
			}
		}
		resp.Body.Close()
	}
	tr.CloseIdleConnections()

	// A consumer whose deletion could not get a turn is deleted by the server once
	// inactive (10 s): wait past that.
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, c := runtime.NumGoroutine(), consumers()
		if g <= baseGoroutines+5 && c == baseConsumers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d streams: %d goroutines (baseline %d), %d EVENTS consumers (baseline %d)", 2*n, g, baseGoroutines, c, baseConsumers)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
