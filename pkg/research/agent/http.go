package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/llm"
	"github.com/searchfleet/searchfleet/pkg/provider"
)

// The kinds of research agent.
const (
	KindOpenAI     = "openai-deep-research"
	KindGemini     = "gemini-deep-research"
	KindPerplexity = "perplexity-agent"
	KindParallel   = "parallel-task"
	KindExa        = "exa-agent"
)

// Kinds lists every kind New builds.
var Kinds = []string{KindOpenAI, KindGemini, KindPerplexity, KindParallel, KindExa}

// kinds are each kind's production base URL, as its SDKs take it (OpenAI's with /v1,
// the others the host root), how it is sent a key, the headers every request carries,
// and its agent.
var kinds = map[string]struct {
	base, runs string
	auth       func(http.Header, string)
	header     http.Header
	agent      func(*client) Agent
}{
	KindOpenAI:     {"https://api.openai.com/v1", "/responses", bearer, nil, func(c *client) Agent { return &openAI{client: c} }},
	KindGemini:     {"https://generativelanguage.googleapis.com", "/v1beta/interactions", keyHeader("x-goog-api-key"), nil, func(c *client) Agent { return &gemini{client: c} }},
	KindPerplexity: {"https://api.perplexity.ai", "/v1/agent", bearer, nil, func(c *client) Agent { return &perplexity{client: c} }},
	KindParallel:   {"https://api.parallel.ai", "/v1/tasks/runs", keyHeader("x-api-key"), nil, func(c *client) Agent { return &parallel{client: c} }},
	KindExa:        {"https://api.exa.ai", "/agent/runs", keyHeader("x-api-key"), http.Header{"Exa-Beta": {exaBeta}}, func(c *client) Agent { return &exa{client: c} }},
}

// New builds the agent of kind at baseURL (empty: the provider's production API),
// authenticating with keys (rotated, a refused key passed over; see
// provider.Credentials), model naming the provider's model, agent or processor
// (empty: chosen by the request's effort), over hc (nil: a client with a 60 s
// timeout; every call of an agent is short: runs are polled, never waited on).
func New(kind, baseURL string, keys []string, model string, hc *http.Client) (Agent, error) {
	k, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("research agent kind %q is not one of %s", kind, strings.Join(Kinds, ", "))
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return k.agent(&client{kind: kind, base: strings.TrimRight(cmp.Or(baseURL, k.base), "/"), runs: k.runs, model: model, hc: hc, auth: k.auth,
		header: k.header, cred: provider.NewCredentials(kind, keys, provider.CredentialOptions{})}), nil
}

func keyHeader(name string) func(http.Header, string) {
	return func(h http.Header, k string) { h.Set(name, k) }
}

func bearer(h http.Header, k string) {
	if k != "" {
		h.Set("Authorization", "Bearer "+k)
	}
}

// maxAnswer bounds what one provider answer may hold (a finished report with its
// sources is well under it).
const maxAnswer = 16 << 20

// client is one agent's HTTP plumbing and configuration: the base URL, the path its
// runs live under (POST submits one, GET {id} reads it, POST {id}/cancel cancels it),
// the configured model, the key rotation, how a key is sent, and the headers every
// request carries.
type client struct {
	kind   string
	base   string
	runs   string
	model  string
	hc     *http.Client
	cred   *provider.Credentials
	auth   func(http.Header, string)
	header http.Header
}

// do sends one JSON request (body nil: none) with extra headers and decodes a 2xx
// answer into out (nil: discarded; a *[]byte takes the body as it is). A non-2xx
// answer is an *llm.Error with the provider's status, message and Retry-After, so a
// refused key is rested and the next one tried (provider.Credentials); its text
// never carries a key.
func (c *client) do(ctx context.Context, method, path string, body any, extra http.Header, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	return c.cred.Try(ctx, nil, func(cred provider.Credential, _ func(llm.Delta)) error {
		var rd io.Reader
		if payload != nil {
			rd = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
		if err != nil {
			return err
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		maps.Copy(req.Header, c.header)
		maps.Copy(req.Header, extra)
		c.auth(req.Header, cred.Value)
		resp, err := c.hc.Do(req)
		if err != nil {
			// The transport's error names the URL: say only what failed.
			msg := "the request did not complete"
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				msg = "the request was cut short: " + ctx.Err().Error()
			}
			return &llm.Error{Provider: c.kind, Message: msg, Err: ctx.Err()}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
		if err != nil {
			return &llm.Error{Provider: c.kind, Status: resp.StatusCode, Message: "the answer was cut off"}
		}
		if len(b) > maxAnswer {
			return &llm.Error{Provider: c.kind, Status: resp.StatusCode, Message: "the answer is larger than " + strconv.Itoa(maxAnswer>>20) + " MiB"}
		}
		if resp.StatusCode/100 != 2 {
			return &llm.Error{Provider: c.kind, Status: resp.StatusCode, Type: errorType(b),
				Message:    redact.Truncate(c.cred.Redact(provider.ErrorMessage(b)), 300),
				RetryAfter: provider.RetryAfter(resp.Header, b, time.Now())}
		}
		if out == nil {
			return nil
		}
		if raw, ok := out.(*[]byte); ok { // a stream, read whole (Parallel's group runs)
			*raw = b
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return &llm.Error{Provider: c.kind, Status: resp.StatusCode, Message: "the answer is not the documented JSON: " + err.Error()}
		}
		return nil
	})
}

// errorType is the type or code of an error body, for provider.Classify
// (insufficient_quota and the like).
func errorType(b []byte) string {
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code any    `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	if s, ok := e.Error.Code.(string); ok && e.Error.Type == "" {
		return s
	}
	return e.Error.Type
}

// afterCursor returns the events after cursor (the count already handed out, as a
// decimal string) and the cursor after them: the agents whose provider answers a poll
// with the run's whole snapshot derive its events from it in a fixed order, so a
// count resumes them.
func afterCursor(events []Event, cursor string) ([]Event, string) {
	n, _ := strconv.Atoi(cursor)
	if n < 0 || n > len(events) {
		n = len(events)
	}
	return events[n:], strconv.Itoa(len(events))
}

// metaRef is the metadata key the fleet's reference goes under (Parallel allows keys
// of at most 16 characters).
const metaRef = "fleet_ref"

// joinInstructions is the input of a provider that takes no instructions apart:
// the instructions, if any, before the question.
func joinInstructions(req Request) string {
	if req.Instructions == "" {
		return req.Input
	}
	return req.Instructions + "\n\n" + req.Input
}

// efforts are the run efforts, in increasing order.
var efforts = []string{"low", "medium", "high", "max"}

// byEffort picks the value for effort from four, one per effort (unknown: medium).
func byEffort[T any](effort string, vals [4]T) T {
	if i := slices.Index(efforts, effort); i >= 0 {
		return vals[i]
	}
	return vals[1]
}

// submit posts a run's body (with extra headers) and returns the provider's id for it
// ("id"; Parallel's "run_id").
func (c *client) submit(ctx context.Context, body any, extra http.Header) (string, error) {
	var out struct {
		ID    string `json:"id"`
		RunID string `json:"run_id"`
	}
	if err := c.do(ctx, "POST", c.runs, body, extra, &out); err != nil {
		return "", err
	}
	if id := cmp.Or(out.ID, out.RunID); id != "" {
		return id, nil
	}
	return "", &llm.Error{Provider: c.kind, Message: "the provider answered without the run's id"}
}

// get reads the run id (what under it, if any: "/result") into out.
func (c *client) get(ctx context.Context, id, what string, out any) error {
	return c.do(ctx, "GET", c.runs+"/"+url.PathEscape(id)+what, nil, nil, out)
}

// Cancel asks the provider to stop the run id.
func (c *client) Cancel(ctx context.Context, id string) error {
	return c.do(ctx, "POST", c.runs+"/"+url.PathEscape(id)+"/cancel", nil, nil, nil)
}
