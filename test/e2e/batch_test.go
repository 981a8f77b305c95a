package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/searchfleet/searchfleet/internal/demo"
)

// An ingress killed (SIGKILL: nothing drained, nothing acknowledged) while it expands
// a batch loses nothing: another ingress takes the expansion over from its cursor once
// the dead one's lease lapses, the batch completes, and every line was run exactly
// once — one answer per custom_id, and no model call made twice.
func TestBatchSurvivesIngressKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start("chatworker", "chatworker", "FLEET_BATCH_CONCURRENCY=32")
	c.start("searchworker", "searchworker")
	c.startIngress()
	ctx := context.Background()

	const n = 3000
	var in strings.Builder
	for i := range n {
		b, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("line-%d", i), "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("Tell me about item %d sim:nosearch", i)}}}})
		in.Write(b)
		in.WriteByte('\n')
	}
	client := openai.NewClient(option.WithBaseURL(c.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	file, err := client.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(in.String()), "items.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := client.Batches.New(ctx, openai.BatchNewParams{InputFileID: file.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	exists := func(line int) bool {
		_, err := c.store.Jobs.JobStatus(ctx, fmt.Sprintf("%s_%d", batch.ID, line))
		return err == nil
	}
	c.eventually("the expansion to start", func() bool { return exists(0) })
	c.ingress().kill()
	if exists(n - 1) {
		t.Fatal("the expansion finished before the ingress was killed; the test proves nothing")
	}

	c.startIngress()
	client = openai.NewClient(option.WithBaseURL(c.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	deadline := time.Now().Add(4 * time.Minute)
	for batch.Status != openai.BatchStatusCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("batch still %s with %+v", batch.Status, batch.RequestCounts)
		}
		time.Sleep(200 * time.Millisecond)
		if b, err := client.Batches.Get(ctx, batch.ID); err == nil {
			batch = b
		}
	}
	if rc := batch.RequestCounts; rc.Completed != n || rc.Failed != 0 || batch.ErrorFileID != "" {
		t.Fatalf("batch %s", batch.RawJSON())
	}
	resp, err := client.Files.Content(ctx, batch.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		json.Unmarshal(sc.Bytes(), &l)
		if seen[l.CustomID] {
			t.Errorf("%s answered twice", l.CustomID)
		}
		seen[l.CustomID] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct lines answered, want %d", len(seen), n)
	}
	if st := c.sim.Stats(); st.Requests["model"] != n || st.Duplicates["model"] != 0 {
		t.Errorf("the simulator saw %d model calls (%d duplicates), want %d and none", st.Requests["model"], st.Duplicates["model"], n)
	}
}

// ingress returns the running ingress process.
func (c *cluster) ingress() *proc {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.procs) - 1; i >= 0; i-- {
		if p := c.procs[i]; p.name == "ingress" && !p.exited() {
			return p
		}
	}
	c.t.Fatal("no ingress is running")
	return nil
}
