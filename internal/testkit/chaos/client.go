package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
)

// submission is one client job: its Idempotency-Key, its body, and what the API
// answered over every attempt.
type submission struct {
	i    int
	key  string
	tag  string
	body []byte
	// path is where it is posted: /v1/jobs, or /v1/research for a research run.
	path string

	mu         sync.Mutex
	attempts   int
	ids        []string // distinct job ids the 2xx answers named, first first
	acceptedAt time.Time
	lastStatus int
	lastCode   string
	lastErr    string
	inUse      int // 409 idempotency_key_in_use answers
	start      time.Time
	history    []string // the first attempts' answers, "+1.2s 503" or "+0.1s error"
}

func (s *submission) accepted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids) > 0
}

// jobID is the job the first 2xx answer named.
func (s *submission) jobID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return ""
	}
	return s.ids[0]
}

// client submits jobs the way a careful client does: every submission carries an
// Idempotency-Key, and any answer that is not final — no answer at all, a 5xx, a 429,
// a 409 idempotency_key_in_use — is retried with the same key and body until a 2xx
// or the give-up time.
type client struct {
	url    string
	hc     *http.Client
	giveUp time.Duration
}

func newClient(url string, giveUp time.Duration) *client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}
	return &client{url: url, hc: &http.Client{Transport: tr, Timeout: 15 * time.Second}, giveUp: giveUp}
}

func newSubmission(run, scenario string, i int, callback string, research bool) *submission {
	tag := fmt.Sprintf("chaosjob-%s-%s-%d", run, scenario, i)
	s := &submission{i: i, key: fmt.Sprintf("chaos-%s-%s-%d", run, scenario, i), tag: tag, path: "/v1/jobs"}
	hook := map[string]any{"url": callback, "events": []string{"completed", "failed", "cancelled"}}
	if research {
		// A research run (effort low: a plan, three children, a writer). An identical
		// request shares the run while it runs, so a retried post answers the same one.
		s.path = "/v1/research"
		s.body, _ = json.Marshal(map[string]any{
			"input": fmt.Sprintf("What is known about item %d? (%s)", i, tag), "model": "research/" + demo.Model, "effort": "low", "callback": hook})
		return s
	}
	text := fmt.Sprintf("Search the web: what is the latest news about item %d? (%s)", i, tag)
	if i%2 == 1 {
		text += " sim:engine=brave"
	}
	s.body, _ = json.Marshal(map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": text}}, "callback": hook})
	return s
}

// post sends the submission once and returns the status, the error code of a non-2xx
// answer and the job id of a 2xx one.
func (c *client) post(ctx context.Context, s *submission) (status int, code, id string, err error) {
	req, err := http.NewRequestWithContext(ctx, "POST", c.url+s.path, bytes.NewReader(s.body))
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", s.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var v struct {
		ID    string `json:"id"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(b, &v)
	if v.Error != nil {
		code = v.Error.Code
	}
	return resp.StatusCode, code, v.ID, nil
}

// submit retries s until a 2xx, a final refusal, or the give-up time.
func (c *client) submit(ctx context.Context, s *submission) {
	start := time.Now()
	s.mu.Lock()
	s.start = start
	s.mu.Unlock()
	wait := 100 * time.Millisecond
	for {
		sent := time.Since(start)
		status, code, id, err := c.post(ctx, s)
		s.mu.Lock()
		s.attempts++
		if len(s.history) < 12 {
			what := fmt.Sprintf("%d %s", status, code)
			if err != nil {
				what = err.Error()
				if i := strings.LastIndex(what, ": "); i >= 0 {
					what = what[i+2:]
				}
			}
			s.history = append(s.history, fmt.Sprintf("+%.1fs→+%.1fs %s", sent.Seconds(), time.Since(start).Seconds(), what))
		}
		s.lastStatus, s.lastCode = status, code
		s.lastErr = ""
		if err != nil {
			s.lastErr = err.Error()
		}
		if code == "idempotency_key_in_use" {
			s.inUse++
		}
		ok := status >= 200 && status < 300 && id != ""
		if ok {
			if len(s.ids) == 0 {
				s.acceptedAt = time.Now()
			}
			if !slices.Contains(s.ids, id) {
				s.ids = append(s.ids, id)
			}
		}
		s.mu.Unlock()
		retry := err != nil || status >= 500 || status == http.StatusTooManyRequests || code == "idempotency_key_in_use"
		if ok || !retry || ctx.Err() != nil || time.Since(start) > c.giveUp {
			return
		}
		if !sleep(ctx, wait) {
			return
		}
		wait = min(wait*2, time.Second)
	}
}

// getJob reads a job's (or a research run's) status: "" and 404 when the API does not
// know it.
func (c *client) getJob(ctx context.Context, id string) (status string, code int, err error) {
	path := "/v1/jobs/"
	if strings.HasPrefix(id, "rr_") {
		path = "/v1/research/"
	}
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+path+id, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var v struct {
		Status string `json:"status"`
	}
	json.NewDecoder(resp.Body).Decode(&v)
	return v.Status, resp.StatusCode, nil
}
