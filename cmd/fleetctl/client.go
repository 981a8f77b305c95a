package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// apiError is an error answer of the API, in the OpenAI shape; batch inputs add the
// invalid lines.
type apiError struct {
	Status int
	Body   struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
		Errors *errorList `json:"errors"`
	}
}

// errorList is the "errors" of an API error or a failed batch.
type errorList struct {
	Data []struct {
		Message string `json:"message"`
	} `json:"data"`
}

func (e *apiError) Error() string {
	msg := e.Body.Error.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// request sends a request to the API and returns the response, or an *apiError for a
// status of 400 and above. body may be nil, an io.Reader (sent as is with
// contentType) or a value sent as JSON.
func (a *app) request(ctx context.Context, method, path string, body any, contentType string) (*http.Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd, contentType = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, a.url+path, rd)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the fleet at %s: %w", a.url, err)
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		e := &apiError{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e.Body) != nil {
			e.Body.Error.Message = strings.TrimSpace(string(b))
		}
		return nil, e
	}
	return resp, nil
}

// call sends a JSON request and decodes the JSON answer into out (if not nil).
func (a *app) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := a.request(ctx, method, path, body, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: unreadable answer: %w", method, path, err)
	}
	return nil
}

// explain prints the invalid lines an error lists (batch inputs), so the whole list
// is seen, not only the summary.
func (a *app) explain(err error) error {
	if e, ok := err.(*apiError); ok && e.Body.Errors != nil && len(e.Body.Errors.Data) > 1 {
		for _, d := range e.Body.Errors.Data {
			fmt.Fprintln(a.stderr, "  "+d.Message)
		}
	}
	return err
}

// readEvents reads a stream of server-sent events, handing each event's data to on
// until on reports the end (end) or the stream ends; last is the last event id seen.
func readEvents(r io.Reader, on func(data []byte) bool) (last string, end bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("id: ")); ok {
			last = string(v)
		} else if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && on(data) {
			return last, true, nil
		}
	}
	return last, false, sc.Err()
}
