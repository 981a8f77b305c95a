package responsesws_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/searchfleet/searchfleet/internal/openresponses"
	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/ingress"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// socketServer is an ingress without chat workers (a response it starts never ends),
// serving its routes on a real listener through HTTPServer, with tenants "a" (key ka,
// one stream) and "b" (key kb, no stream limit).
func socketServer(t *testing.T, tweak func(*ingress.Options)) (wsURL string, srv *http.Server) {
	t.Helper()
	b, _ := bustest.New(t)
	rdb, prefix := testenv.Redis(t)
	tenants := []config.Tenant{{ID: "a", APIKeys: []string{"ka"}, Limits: config.Limits{Streams: 1}}, {ID: "b", APIKeys: []string{"kb"}}}
	keys, err := ingress.NewTenants(tenants)
	if err != nil {
		t.Fatal(err)
	}
	o := ingress.Options{Bus: b, Store: ingress.StoreOf(state.New(rdb, prefix, time.Hour)), Models: []string{"m1"}, MaxBody: 4096, Log: slog.New(slog.DiscardHandler),
		Tenants: keys, Limits: config.NewTenantLimits(config.Limits{}, tenants), JobTimeout: time.Minute, SyncWait: time.Minute}
	if tweak != nil {
		tweak(&o)
	}
	s := ingress.New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv = s.HTTPServer(5*time.Second, time.Minute)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "ws://" + ln.Addr().String() + "/v1/responses", srv
}

func dial(t *testing.T, url, key string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if c != nil {
		t.Cleanup(func() { c.CloseNow() })
	}
	return c, resp, err
}

// refusedWith checks a refused upgrade: its status and its Responses error code.
func refusedWith(t *testing.T, what string, resp *http.Response, err error, status int, code string) {
	t.Helper()
	if err == nil || resp == nil || resp.StatusCode != status {
		t.Fatalf("%s: %v %v", what, resp, err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &body) != nil || body.Error.Code != code || body.Error.Message == "" {
		t.Fatalf("%s: %s", what, b)
	}
}

// next reads the socket's next message as a JSON object.
func next(t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return o
}

// nextError reads messages up to the next error event and checks its shape.
func nextError(t *testing.T, c *websocket.Conn) (code string, status float64) {
	t.Helper()
	for {
		o := next(t, c)
		if o["type"] != "error" {
			continue
		}
		if errs := openresponses.CheckSocketError("error event", o); len(errs) > 0 {
			t.Fatalf("%v: %v", errs, o)
		}
		return o["error"].(map[string]any)["code"].(string), o["status"].(float64)
	}
}

func send(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// A socket is authenticated, same-origin and an upgrade before it opens: a refusal is
// an HTTP answer in the Responses error shape.
func TestSocketRefusedBeforeUpgrade(t *testing.T) {
	t.Parallel()
	url, _ := socketServer(t, nil)
	_, resp, err := dial(t, url, "")
	refusedWith(t, "no key", resp, err, http.StatusUnauthorized, "invalid_api_key")
	_, resp, err = dial(t, url, "wrong")
	refusedWith(t, "a wrong key", resp, err, http.StatusUnauthorized, "invalid_api_key")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, resp, err = websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer kb"}, "Origin": {"https://evil.example"}}})
	refusedWith(t, "another origin", resp, err, http.StatusForbidden, "cross_origin_request")
	host := strings.TrimPrefix(strings.SplitN(url, "/v1", 2)[0], "ws://")
	_, resp, err = websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer kb"}, "Origin": {"https://" + host}}})
	refusedWith(t, "the same host by another scheme", resp, err, http.StatusForbidden, "cross_origin_request")
	_, resp, err = websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer kb"}, "Origin": {"http://" + host}, "Sec-Fetch-Site": {"same-site"}}})
	refusedWith(t, "a same-site page of another origin", resp, err, http.StatusForbidden, "cross_origin_request")
	same, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer kb"}, "Origin": {"http://" + host}}})
	if err != nil {
		t.Fatalf("a same-origin page's socket: %v", err)
	}
	same.CloseNow()

	req, _ := http.NewRequest("GET", "http"+strings.TrimPrefix(url, "ws"), nil)
	req.Header.Set("Authorization", "Bearer kb")
	plain, err := http.DefaultClient.Do(req)
	refusedWith(t, "a GET without upgrade", plain, errors.New("no upgrade"), http.StatusUpgradeRequired, "websocket_upgrade_required")
	if err != nil {
		t.Fatal(err)
	}
}

// A tenant holds at most its Streams limit of sockets (429 past it, a slot freed when
// one closes); an ingress at most MaxWebSockets (503).
func TestSocketLimits(t *testing.T) {
	t.Parallel()
	url, _ := socketServer(t, nil)
	first, _, err := dial(t, url, "ka")
	if err != nil {
		t.Fatal(err)
	}
	_, resp, err := dial(t, url, "ka")
	refusedWith(t, "a tenant's second socket", resp, err, http.StatusTooManyRequests, "rate_limit_exceeded")
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	first.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, _, err := dial(t, url, "ka")
		if err == nil {
			c.Close(websocket.StatusNormalClosure, "")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant's slot was not freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	url, _ = socketServer(t, func(o *ingress.Options) { o.MaxWebSockets = 3 })
	for range 3 {
		if _, _, err := dial(t, url, "kb"); err != nil {
			t.Fatal(err)
		}
	}
	_, resp, err = dial(t, url, "kb")
	refusedWith(t, "an ingress's fourth socket", resp, err, http.StatusServiceUnavailable, "overloaded")
}

// One response runs at a time: a response.create sent meanwhile is an error event,
// and the socket stays open. A message over MaxBody is an error event too.
func TestSocketOneResponseAtATime(t *testing.T) {
	t.Parallel()
	url, _ := socketServer(t, nil)
	c, _, err := dial(t, url, "kb")
	if err != nil {
		t.Fatal(err)
	}
	create := `{"type":"response.create","model":"m1","input":"Say hello."}`
	send(t, c, create)
	send(t, c, create)
	if code, status := nextError(t, c); code != "response_in_progress" || status != http.StatusConflict {
		t.Fatalf("a second response.create: %s %v", code, status)
	}

	big, _, err := dial(t, url, "kb")
	if err != nil {
		t.Fatal(err)
	}
	send(t, big, `{"type":"response.create","model":"m1","input":"`+strings.Repeat("x", 8000)+`"}`)
	if code, status := nextError(t, big); code != "request_too_large" || status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a message over MaxBody: %s %v", code, status)
	}
	send(t, big, `{"type":"response.create","input":"x"}`)
	if code, _ := nextError(t, big); code != "invalid_request_error" {
		t.Fatalf("after a refused message, the socket answers: %s", code)
	}
}

// A socket with nothing running closes after WebSocketIdle; one open for
// WebSocketMaxAge gets websocket_connection_limit_reached, then closes.
func TestSocketIdleAndAge(t *testing.T) {
	t.Parallel()
	idleURL, _ := socketServer(t, func(o *ingress.Options) { o.WebSocketIdle = 100 * time.Millisecond })
	c, _, err := dial(t, idleURL, "kb")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("an idle socket: %v", err)
	}

	agedURL, _ := socketServer(t, func(o *ingress.Options) { o.WebSocketMaxAge = 100 * time.Millisecond })
	c, _, err = dial(t, agedURL, "kb")
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := nextError(t, c); code != "websocket_connection_limit_reached" {
		t.Fatalf("an old socket: %s", code)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Fatalf("an old socket after its error: %v", err)
	}
}

// Shutting the server down closes its sockets (1001) and refuses new ones.
func TestSocketClosedOnShutdown(t *testing.T) {
	t.Parallel()
	url, srv := socketServer(t, nil)
	c, _, err := dial(t, url, "kb")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("a socket at shutdown: %v", err)
	}
}
