// Package responsesws serves the Responses WebSocket mode (Open Responses, "WebSocket
// Transport"): GET /v1/responses with a WebSocket upgrade opens a socket on which the
// client sends {"type":"response.create", ...the POST /v1/responses body without
// stream, stream_options and background} and receives the same events a streamed POST
// sends, one response after another. Each turn runs exactly as a streamed POST does —
// the ingress's own handler, limits, budget and storage, reached through Options — so the
// two transports cannot drift apart.
//
// A socket remembers its most recent responses (socketCache): previous_response_id
// finds them there first (the ingress asks the turn's Turn, TurnOf), which is how a
// response created with store: false is continued on the socket that made it; it is
// found nowhere else, so another socket gets previous_response_not_found. A
// continuation that fails forgets the response it continued.
//
// Bounds: the key is checked before the upgrade (a refusal is an HTTP answer in the
// Responses error shape); an ingress holds at most MaxSockets sockets and a tenant at
// most its Streams limit across the fleet (Options.Admit: a lease per socket, apart from
// the stream slot each running turn takes); a message may have MaxMessage bytes; one
// response runs at a time (a response.create sent meanwhile gets an error event); a
// socket with nothing running is closed after Idle, and one open for MaxAge (60
// minutes by default, as the specification says) gets the
// websocket_connection_limit_reached error once its running response ends, then is
// closed. Close (the server's shutdown) closes every socket (1001). Every refusal on an
// open socket is an error event; the socket stays open.
package responsesws

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// Options configure the sockets: what a socket takes from the ingress, and its
// bounds.
type Options struct {
	// Admit takes the tenant's slot for one more open socket (its Streams limit,
	// across the fleet) and returns its release; false when it has answered r with
	// the refusal.
	Admit func(w http.ResponseWriter, r *http.Request) (release func(), ok bool)
	// Create serves one response.create as a streamed POST /v1/responses, with the
	// tenant's rate, budget and limits. r's context carries the turn's Turn.
	Create http.HandlerFunc
	// MaxSockets bounds the sockets this ingress holds open (0: 1024); Idle closes a
	// socket with no response running for that long (0: 10 minutes), MaxAge ends one
	// open that long (0: 60 minutes).
	MaxSockets int
	Idle       time.Duration
	MaxAge     time.Duration
	// MaxMessage bounds a message, as MaxBody bounds a POST body (0: 4 MiB).
	MaxMessage int64
}

// Server serves the Responses WebSockets of one ingress.
type Server struct {
	o       Options
	sockets socketSet
}

// New returns the sockets' server; mount it at GET /v1/responses behind the API's
// key check.
func New(o Options) *Server {
	if o.MaxSockets <= 0 {
		o.MaxSockets = 1024
	}
	if o.Idle <= 0 {
		o.Idle = 10 * time.Minute
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 60 * time.Minute
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 4 << 20
	}
	return &Server{o: o, sockets: socketSet{closing: make(chan struct{})}}
}

// Turn is what one response.create's request carries in its context: the ingress
// looks previous_response_id up among the socket's own recent responses first
// (Conversation; store: false ones are found only there) and hands the turn's
// complete input back (SetInput) for the socket to remember with its answer.
type Turn struct {
	cache *socketCache
	input json.RawMessage
}

type turnKey struct{}

// TurnOf is the socket turn ctx belongs to; nil for a request that is not one.
func TurnOf(ctx context.Context) *Turn {
	t, _ := ctx.Value(turnKey{}).(*Turn)
	return t
}

// Conversation is the conversation of the socket's response id (its input and
// output items), nil if the socket does not remember it.
func (t *Turn) Conversation(id string) []json.RawMessage { return t.cache.conversation(id) }

// SetInput records the turn's complete input once it is resolved.
func (t *Turn) SetInput(input json.RawMessage) { t.input = input }

// socketWriteTimeout is how long one message may take to reach a client: one that
// stops reading is cut off then.
const socketWriteTimeout = 30 * time.Second

// socketCacheEntries bounds the responses a socket remembers; their conversations
// together are bounded by socketCacheBytes.
const socketCacheEntries = 8

// socketSet is the ingress's open sockets.
type socketSet struct {
	mu      sync.Mutex
	open    int
	closing chan struct{} // closed when the server shuts down
}

// take counts a new socket unless max are open or the server is shutting down.
func (ss *socketSet) take(max int) (<-chan struct{}, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	select {
	case <-ss.closing:
		return nil, false
	default:
	}
	if ss.open >= max {
		return nil, false
	}
	ss.open++
	return ss.closing, true
}

func (ss *socketSet) done() {
	ss.mu.Lock()
	ss.open--
	ss.mu.Unlock()
}

// Close closes every open socket and refuses new ones (the ingress's http.Server runs
// it on Shutdown). A response a socket was running goes on as a job: a stored one can
// be fetched later.
func (s *Server) Close() {
	s.sockets.mu.Lock()
	defer s.sockets.mu.Unlock()
	select {
	case <-s.sockets.closing:
	default:
		close(s.sockets.closing)
	}
}

// socketError is an error event: the Responses error object with the HTTP status it
// stands for. error.code is always set (the error type when the fleet's error has
// none).
func socketError(e *wire.Error) []byte {
	code := cmp.Or(e.Code, e.Type, "server_error")
	var param any
	if e.Param != "" {
		param = e.Param
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "status": e.Status, "sequence_number": 0,
		"error": map[string]any{"type": e.Type, "code": code, "message": e.Message, "param": param}})
	return b
}

// ServeHTTP is GET /v1/responses: it upgrades an authenticated request to a
// Responses WebSocket and serves it until either side closes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(e *wire.Error) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.Status)
		w.Write(responses.Client.EncodeError(e))
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		w.Header().Set("Upgrade", "websocket")
		fail(&wire.Error{Status: http.StatusUpgradeRequired, Type: "invalid_request_error", Code: "websocket_upgrade_required",
			Message: "GET /v1/responses opens a WebSocket (Responses WebSocket mode); create a response over HTTP with POST /v1/responses."})
		return
	}
	if !sameOrigin(r) {
		fail(&wire.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "cross_origin_request",
			Message: "Cross-origin browser WebSockets are refused; connect from a server or a same-origin page."})
		return
	}
	closing, ok := s.sockets.take(s.o.MaxSockets)
	if !ok {
		w.Header().Set("Retry-After", "1")
		fail(&wire.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "overloaded",
			Message: "This server has no room for another WebSocket; retry shortly, or use POST /v1/responses."})
		return
	}
	defer s.sockets.done()
	release, ok := s.o.Admit(w, r)
	if !ok {
		return
	}
	defer release()
	// The request's deadlines were for an HTTP answer; the socket has its own.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // origin checked above
	if err != nil {
		return // Accept has answered
	}
	defer conn.CloseNow()
	// A message over the limit is read to its end and refused (socket.read); one four
	// times over closes the socket.
	conn.SetReadLimit(4 * s.o.MaxMessage)
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	sock := &socket{s: s, conn: conn, ctx: ctx, cache: &socketCache{max: 4 * s.o.MaxMessage}}
	sock.serve(closing)
}

// sameOrigin reports whether a browser's WebSocket comes from the API's own origin
// (API clients send neither header): by Sec-Fetch-Site where the browser sends it,
// else by the Origin's scheme and host, compared with the request's.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(u.Host, r.Host)
}

// socket is one open Responses WebSocket.
type socket struct {
	s     *Server
	conn  *websocket.Conn
	ctx   context.Context
	cache *socketCache
}

// inbound is one message from the client, or the error that ended reading.
type inbound struct {
	data   []byte
	tooBig bool
	err    error
	binary bool
}

// turnEnd is how a turn ended: the response it made (completed), or not.
type turnEnd struct {
	previous string          // the previous_response_id it continued ("" none)
	id       string          // the response's id, if one was made
	failed   bool            // the turn failed: an error, or a failed response
	convo    json.RawMessage // the complete input and output, when completed
	// last is the turn's terminal event (the response's completed, failed or
	// incomplete event, or its error), sent by serve once the socket is ready for
	// the next response.create: a client that answers it at once is not refused as
	// busy, and finds the response it continues.
	last []byte
}

// serve reads the client's messages and runs their turns, one at a time, until the
// client leaves, the socket idles or ages out, or the server shuts down.
func (k *socket) serve(closing <-chan struct{}) {
	idleAfter, maxAge := k.s.o.Idle, k.s.o.MaxAge
	msgs := make(chan inbound)
	go k.read(msgs)
	ends := make(chan turnEnd, 1)
	idle := time.NewTimer(idleAfter)
	defer idle.Stop()
	aged := time.NewTimer(maxAge)
	defer aged.Stop()
	busy, old := false, false
	limitReached := func() {
		k.send(socketError(&wire.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "websocket_connection_limit_reached",
			Message: fmt.Sprintf("This WebSocket has been open for %s, the longest a socket may stay open; open a new one (a store: false response cannot be continued there).", maxAge)}))
		k.conn.Close(websocket.StatusNormalClosure, "connection limit reached")
	}
	for {
		select {
		case m := <-msgs:
			if m.err != nil {
				return // the client closed the socket, or it broke
			}
			switch {
			case busy:
				k.send(socketError(&wire.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "response_in_progress",
					Message: "A response is already running on this WebSocket: send the next response.create after its terminal event, or open another socket."}))
				continue
			case old:
				limitReached()
				return
			}
			body, previous, e := k.createBody(m)
			if e != nil {
				k.send(socketError(e))
				continue
			}
			busy = true
			idle.Stop()
			go func() { ends <- k.turn(k.ctx, body, previous) }()
		case end := <-ends:
			busy = false
			switch {
			case end.failed && end.previous != "":
				k.cache.forget(end.previous)
			case end.convo != nil:
				k.cache.remember(end.id, end.convo)
			}
			if end.last != nil {
				k.send(end.last)
			}
			if old {
				limitReached()
				return
			}
			idle.Reset(idleAfter)
		case <-idle.C:
			if !busy {
				k.conn.Close(websocket.StatusNormalClosure, "idle for "+idleAfter.String())
				return
			}
		case <-aged.C:
			old = true
			if !busy {
				limitReached()
				return
			}
		case <-closing:
			k.conn.Close(websocket.StatusGoingAway, "server shutting down")
			return
		}
	}
}

// read passes each message of the client to msgs until reading fails. A message
// over MaxBody is read to its end without being kept.
func (k *socket) read(msgs chan<- inbound) {
	for {
		typ, rd, err := k.conn.Reader(k.ctx)
		if err != nil {
			select {
			case msgs <- inbound{err: err}:
			case <-k.ctx.Done():
			}
			return
		}
		limit := k.s.o.MaxMessage
		data, err := io.ReadAll(io.LimitReader(rd, limit+1))
		m := inbound{data: data, binary: typ == websocket.MessageBinary}
		if err == nil && int64(len(data)) > limit {
			m.data, m.tooBig = nil, true
			_, err = io.Copy(io.Discard, rd)
		}
		if err != nil {
			m = inbound{err: err}
		}
		select {
		case msgs <- m:
		case <-k.ctx.Done():
			return
		}
		if m.err != nil {
			return
		}
	}
}

// send writes one event to the client; a client that does not take it within
// socketWriteTimeout loses the socket.
func (k *socket) send(event []byte) error {
	ctx, cancel := context.WithTimeout(k.ctx, socketWriteTimeout)
	defer cancel()
	return k.conn.Write(ctx, websocket.MessageText, event)
}

// transportParams are POST /v1/responses parameters a socket message must not carry.
var transportParams = []string{"stream", "stream_options", "background"}

// createBody checks a client message and returns the POST /v1/responses body it
// stands for, streamed, and the previous_response_id it names.
func (k *socket) createBody(m inbound) ([]byte, string, *wire.Error) {
	if m.tooBig {
		return nil, "", &wire.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("The message exceeds the limit of %d bytes.", k.s.o.MaxMessage)}
	}
	var top map[string]json.RawMessage
	if m.binary || json.Unmarshal(m.data, &top) != nil || top == nil {
		return nil, "", &wire.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_json",
			Message: "Each message must be a JSON object as text, such as {\"type\":\"response.create\", \"model\": ..., \"input\": ...}."}
	}
	var typ string
	json.Unmarshal(top["type"], &typ)
	if typ != "response.create" {
		return nil, "", &wire.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unknown_event", Param: "type",
			Message: fmt.Sprintf("Unknown event type %q: a Responses WebSocket takes response.create.", redact.Clip(typ, 64))}
	}
	for _, p := range transportParams {
		if _, ok := top[p]; ok {
			return nil, "", wire.Invalid(p, "'%s' is an HTTP parameter: a response.create message leaves it out (a socket always streams).", p)
		}
	}
	var previous string
	if raw, ok := top["previous_response_id"]; ok {
		json.Unmarshal(raw, &previous)
	}
	delete(top, "type")
	top["stream"] = json.RawMessage("true")
	body, _ := json.Marshal(top)
	return body, previous, nil
}

// turn runs one response.create as a streamed POST /v1/responses (the same handler,
// through socketWriter) and relays its events.
func (k *socket) turn(ctx context.Context, body []byte, previous string) turnEnd {
	end := turnEnd{previous: previous}
	t := &Turn{cache: k.cache}
	ctx = context.WithValue(ctx, turnKey{}, t)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/responses", bytes.NewReader(body))
	if err != nil {
		end.failed = true
		return end
	}
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	sw := &socketWriter{header: http.Header{}, sock: k}
	k.s.o.Create(sw, req)
	sw.finish()
	if !sw.broken {
		end.last = sw.last
	}
	switch {
	case sw.status != 0 && sw.status != http.StatusOK:
		end.failed = true
	case sw.final == nil:
		end.failed = true
	default:
		var resp struct {
			ID     string            `json:"id"`
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
		}
		json.Unmarshal(sw.final, &resp)
		// An incomplete response did not fail, but only a completed one is continued
		// (as over HTTP).
		end.id, end.failed = resp.ID, resp.Status == string(wire.StatusFailed) || resp.Status == string(wire.StatusCancelled)
		if resp.Status == string(wire.StatusCompleted) {
			var input []json.RawMessage
			json.Unmarshal(t.input, &input)
			end.convo, _ = json.Marshal(append(input, resp.Output...))
		}
	}
	return end
}

// socketWriter is the http.ResponseWriter a socket's turn is answered through: the
// server-sent events of a 200 go to the client as messages, one event each; any
// other answer is an error, sent as an error event with its status.
type socketWriter struct {
	header http.Header
	sock   *socket
	status int
	buf    bytes.Buffer // SSE text not yet split into events, or an error body
	final  []byte       // the terminal event's response
	last   []byte       // the terminal event, held back for serve to send (turnEnd.last)
	broken bool         // the client stopped taking events
}

func (sw *socketWriter) Header() http.Header { return sw.header }

func (sw *socketWriter) WriteHeader(code int) {
	if sw.status == 0 {
		sw.status = code
	}
}

// maxErrorBody bounds an error body kept to be sent as an event.
const maxErrorBody = 64 << 10

func (sw *socketWriter) Write(p []byte) (int, error) {
	sw.WriteHeader(http.StatusOK)
	if sw.status != http.StatusOK {
		if sw.buf.Len() < maxErrorBody {
			sw.buf.Write(p[:min(len(p), maxErrorBody-sw.buf.Len())])
		}
		return len(p), nil
	}
	if sw.broken {
		return 0, errors.New("the client stopped taking events")
	}
	sw.buf.Write(p)
	for {
		frame, _, ok := bytes.Cut(sw.buf.Bytes(), []byte("\n\n"))
		if !ok {
			return len(p), nil
		}
		sw.event(frame)
		sw.buf.Next(len(frame) + 2)
	}
}

// Flush is a no-op: each event is sent as it is written.
func (sw *socketWriter) Flush() {}

// event sends the data of one server-sent event (comments, keep-alives, are not
// sent: a WebSocket has its own).
func (sw *socketWriter) event(frame []byte) {
	var data []byte
	for _, line := range bytes.Split(frame, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	if data == nil || string(data) == "[DONE]" {
		return
	}
	var head struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	json.Unmarshal(data, &head)
	switch head.Type {
	case "response.completed", "response.failed", "response.incomplete":
		sw.final, sw.last = head.Response, data
		return
	case "error":
		sw.last = data
		return
	}
	if !sw.broken && sw.sock.send(data) != nil {
		sw.broken = true
	}
}

// finish sends an answer that was not a stream as an error event.
func (sw *socketWriter) finish() {
	if sw.status == 0 || sw.status == http.StatusOK || sw.broken {
		return
	}
	var body struct {
		Error jobs.ErrorBody `json:"error"`
	}
	e := &wire.Error{Status: sw.status, Type: "server_error", Message: "The response could not be created."}
	if json.Unmarshal(sw.buf.Bytes(), &body) == nil && body.Error.Message != "" {
		e.Type, e.Message = body.Error.Type, body.Error.Message
		if body.Error.Param != nil {
			e.Param = *body.Error.Param
		}
		if body.Error.Code != nil {
			e.Code = *body.Error.Code
		}
	}
	if after := sw.header.Get("Retry-After"); after != "" {
		if n, err := strconv.Atoi(after); err == nil {
			e.Message += fmt.Sprintf(" Retry after %d s.", n)
		}
	}
	sw.last = socketError(e)
}

// socketCache is the conversations of a socket's most recent responses (their input
// and output items), at most socketCacheEntries of them in at most bytes.
type socketCache struct {
	mu      sync.Mutex
	max     int64
	entries []socketEntry // oldest first
}

type socketEntry struct {
	id    string
	convo json.RawMessage
}

// conversation is the conversation response id continues, nil if the socket does not
// remember it.
func (c *socketCache) conversation(id string) []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.entries, func(e socketEntry) bool { return e.id == id })
	var items []json.RawMessage
	if i < 0 || json.Unmarshal(c.entries[i].convo, &items) != nil {
		return nil
	}
	return items
}

// remember keeps a response's conversation, forgetting the oldest ones past the
// bounds; one larger than the whole cache is not kept.
func (c *socketCache) remember(id string, convo json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(convo)) > c.max {
		return
	}
	c.entries = append(c.entries, socketEntry{id: id, convo: convo})
	total := int64(0)
	for _, e := range c.entries {
		total += int64(len(e.convo))
	}
	for len(c.entries) > socketCacheEntries || total > c.max {
		total -= int64(len(c.entries[0].convo))
		c.entries = c.entries[1:]
	}
}

// forget drops a response from the cache.
func (c *socketCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e socketEntry) bool { return e.id == id })
}
