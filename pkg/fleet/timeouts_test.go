package fleet_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/demo"
	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// shortDeadlines are HTTP deadlines short enough to pass inside a test.
func shortDeadlines(e *config.Env) {
	e.HTTPHeaderTimeout, e.HTTPIdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	e.HTTPBodyTimeout, e.HTTPUploadTimeout = 300*time.Millisecond, 600*time.Millisecond
	e.SSEMaxDuration = 1500 * time.Millisecond
}

// dial opens a raw connection to ingress.
func dial(t *testing.T, f *fleettest.Fleet) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(f.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// trickle writes p one byte every 100ms until it is written or a write fails.
func trickle(c net.Conn, p string) {
	go func() {
		for i := range len(p) {
			if _, err := c.Write([]byte{p[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// requireClosed reads from r until the server closes the connection. The 5s bound
// only keeps a broken server from hanging the test; the deadlines under test are
// far shorter.
func requireClosed(t *testing.T, c net.Conn, r io.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept the connection open")
	}
	// io.Copy's nil is EOF: closed; a reset is closed too.
}

// Slow or idle clients are cut off within the configured deadlines: headers never
// finished, an idle keep-alive connection, a body or a multipart upload trickled a
// byte at a time.
func TestHTTPDeadlines(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(shortDeadlines))

	t.Run("slowloris headers", func(t *testing.T) {
		t.Parallel()
		c := dial(t, f)
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: fleet\r\n")
		trickle(c, strings.Repeat("X-Slow: 1\r\n", 100))
		requireClosed(t, c, c)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		t.Parallel()
		c := dial(t, f)
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: fleet\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("healthz: %d close=%v", resp.StatusCode, resp.Close)
		}
		requireClosed(t, c, br)
	})
	t.Run("trickled body", func(t *testing.T) {
		t.Parallel()
		c := dial(t, f)
		body := `{"model":"` + demo.Model + `","messages":[{"role":"user","content":"` + strings.Repeat("a", 500) + `"}]}`
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: fleet\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
		trickle(c, body)
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode != 400 {
			t.Errorf("a trickled body was answered %d", resp.StatusCode)
		}
		requireClosed(t, c, br)
	})
	t.Run("trickled upload", func(t *testing.T) {
		t.Parallel()
		c := dial(t, f)
		body := "--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n" +
			strings.Repeat("{}\n", 300) + "\r\n--b--\r\n"
		fmt.Fprintf(c, "POST /v1/files HTTP/1.1\r\nHost: fleet\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n", len(body))
		trickle(c, body)
		br := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if resp, err := http.ReadResponse(br, nil); err == nil && resp.StatusCode < 400 {
			t.Errorf("a trickled upload was answered %d", resp.StatusCode)
		}
		requireClosed(t, c, br)
	})
	t.Run("answer outlives the body deadline", func(t *testing.T) {
		// The read deadline is lifted once the body is in: a synchronous answer that
		// takes longer than the body deadline (a model 429 with a 1s Retry-After) is
		// still given.
		f.Sim.SetFault("/v1/chat", 429, time.Second, 1)
		status, resp := f.Chat(t, "hello, no search needed")
		if status != 200 || fleettest.Content(resp) == "" {
			t.Errorf("slow answer: %d %v", status, resp)
		}
	})
}

// A job's event stream ends at FLEET_SSE_MAX_DURATION even while the job runs on.
func TestSSEMaxDuration(t *testing.T) {
	t.Parallel()
	f := fleettest.Start(t, fleettest.Env(shortDeadlines))
	f.Sim.SetFault("/v1/chat", 429, 30*time.Second, 0) // the job stays running
	status, body, _ := f.Do(t, "POST", "/v1/jobs", map[string]any{"model": demo.Model, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if status != 202 {
		t.Fatalf("submit: %d %s", status, body)
	}
	id := strings.SplitN(strings.SplitN(string(body), `"id":"`, 2)[1], `"`, 2)[0]
	c := dial(t, f)
	fmt.Fprintf(c, "GET /v1/jobs/%s/events HTTP/1.1\r\nHost: fleet\r\n\r\n", id)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream did not end: %v (read %q)", err, b)
	}
	if !strings.Contains(string(b), "event: queued") {
		t.Errorf("stream carried no events: %q", b)
	}
}
