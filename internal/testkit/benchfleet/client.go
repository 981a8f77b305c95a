package benchfleet

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/chaos"
	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus"
)

// Client drives the fleet's API at Base, with Key (if set) as its bearer token.
type Client struct {
	Base, Key string
	HTTP      *http.Client
}

// Do sends body (nil, or a value sent as JSON) and returns the status and the answer.
func (c *Client) Do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Messages is a conversation of one user message.
func Messages(text string) []any { return []any{map[string]any{"role": "user", "content": text}} }

// Ask sends one question that needs the web and returns how long the cited answer
// took; an answer that is not a 200 citing [1] is an error.
func (c *Client) Ask(ctx context.Context, question string) (time.Duration, error) {
	start := time.Now()
	status, b, err := c.Do(ctx, "POST", "/v1/chat/completions", map[string]any{"model": demo.Model, "messages": Messages(question)})
	if err != nil {
		return 0, err
	}
	if status != 200 || !bytes.Contains(b, []byte("[1]")) {
		return 0, fmt.Errorf("status %d: %.200s", status, b)
	}
	return time.Since(start), nil
}

// Submit sends one async job, with a callback to callback unless it is empty, and
// returns its id.
func (c *Client) Submit(ctx context.Context, text, callback string) (string, error) {
	body := map[string]any{"model": demo.Model, "messages": Messages(text)}
	if callback != "" {
		body["callback"] = map[string]any{"url": callback}
	}
	status, b, err := c.Do(ctx, "POST", "/v1/jobs", body)
	if err != nil {
		return "", err
	}
	var j struct {
		ID string `json:"id"`
	}
	if status != http.StatusAccepted || json.Unmarshal(b, &j) != nil {
		return "", fmt.Errorf("status %d: %.200s", status, b)
	}
	return j.ID, nil
}

// SubmitUntilAccepted submits text as an async job without a callback, again every
// 50ms until the fleet accepts it or ctx ends.
func (c *Client) SubmitUntilAccepted(ctx context.Context, text string) {
	for ctx.Err() == nil {
		if _, err := c.Submit(ctx, text, ""); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BatchStatus is the part of a batch object the benchmarks read.
type BatchStatus struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	RequestCounts struct {
		Total, Completed, Failed int
	} `json:"request_counts"`
}

// Batch submits questions as the simple form and returns the batch's id.
func (c *Client) Batch(ctx context.Context, questions []string) (string, error) {
	status, b, err := c.Do(ctx, "POST", "/v1/batches", map[string]any{"queries": questions, "model": demo.Model})
	if err != nil {
		return "", err
	}
	var v BatchStatus
	if status != 200 || json.Unmarshal(b, &v) != nil {
		return "", fmt.Errorf("creating the batch: status %d: %.200s", status, b)
	}
	return v.ID, nil
}

// BatchStatus reads batch id (the zero value if it cannot be read).
func (c *Client) BatchStatus(ctx context.Context, id string) BatchStatus {
	var v BatchStatus
	if _, b, err := c.Do(ctx, "GET", "/v1/batches/"+id, nil); err == nil {
		json.Unmarshal(b, &v)
	}
	return v
}

// WaitBatch polls batch id every 50ms until it ends or ctx does.
func (c *Client) WaitBatch(ctx context.Context, id string) BatchStatus {
	var b BatchStatus
	for ctx.Err() == nil {
		if b = c.BatchStatus(ctx, id); batch.Ended(b.Status) {
			return b
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

// JetStream connects to the NATS server at url; close closes the connection.
func JetStream(url string) (js jetstream.JetStream, close func(), err error) {
	nc, err := natsgo.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// Consumers calls fn with the info of every consumer of the streams work waits in
// (JOBS, CHAT, SEARCH), lanes included, and returns the first error reading them.
func Consumers(ctx context.Context, js jetstream.JetStream, fn func(*jetstream.ConsumerInfo)) error {
	var first error
	for _, stream := range []string{bus.StreamJobs, bus.StreamChat, bus.StreamSearch} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		infos := s.ListConsumers(ctx)
		for info := range infos.Info() {
			fn(info)
		}
		if err := infos.Err(); err != nil {
			first = cmp.Or(first, fmt.Errorf("%s: %w", stream, err))
		}
	}
	return first
}

// WaitReady waits until the ingress at base answers /readyz with 200.
func WaitReady(ctx context.Context, base string, within time.Duration) error {
	return chaos.Poll(ctx, within, 100*time.Millisecond, func() error {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return fmt.Errorf("the ingress did not become ready in %s: %w", within, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("the ingress did not become ready in %s: %s", within, resp.Status)
		}
		return nil
	})
}
