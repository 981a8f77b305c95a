// Package ingress is the ingress: the HTTP API clients talk to. It validates requests,
// records jobs, publishes them to the fleet and, for synchronous calls, waits for the
// job's terminal event; it holds no job state of its own, so replicas scale behind a
// load balancer.
package ingress

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/searchfleet/searchfleet/pkg/batch"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/fetch"
	"github.com/searchfleet/searchfleet/pkg/ingress/console"
	"github.com/searchfleet/searchfleet/pkg/ingress/mcp"
	"github.com/searchfleet/searchfleet/pkg/ingress/responsesws"
	"github.com/searchfleet/searchfleet/pkg/intent"
	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/anthropic"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/llm/responses"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/metrics"
	"github.com/searchfleet/searchfleet/pkg/research"
	"github.com/searchfleet/searchfleet/pkg/spend"
	"github.com/searchfleet/searchfleet/pkg/trace"
	"github.com/searchfleet/searchfleet/pkg/webhook"
)

// Options configure the ingress (New).
type Options struct {
	Bus   *bus.Bus
	Store Store
	// Research runs research runs (nil: /v1/research is not served).
	Research *research.Service
	// Models are the client model names the fleet serves.
	Models []string
	// Targets are the protocol and provider model serving each client model name: a
	// request's reasoning settings the target cannot take are named in its answer's
	// warnings (wire.ReasoningNotes). A model without one gets no such notes.
	Targets map[string]ModelTarget
	// Reasoning seals the reasoning state a Responses client asks for (include
	// reasoning.encrypted_content) and opens it when the client sends it back (nil:
	// no state is given, and a sealed item sent back is refused).
	Reasoning *wire.Sealer
	// Tools validates direct searches (nil: no web search configured).
	Tools *intent.Toolset
	// Tenants maps API keys to tenants; nil or empty means an open API (one tenant).
	Tenants *Tenants
	// Limits are each tenant's limits (nil: none; see limits.go).
	Limits *config.TenantLimits
	// MaxBody bounds request bodies.
	MaxBody int64
	// FileURLs reads the files a request gives by URL for a model that cannot take
	// them by URL (fileurl.go); nil: such a file is refused.
	FileURLs *fetch.Fetcher
	// JobTimeout is each job's deadline; SyncWait how long a synchronous request waits.
	JobTimeout time.Duration
	SyncWait   time.Duration
	// BodyTimeout bounds reading a request body, UploadTimeout an authenticated
	// upload's (POST /v1/files; and writing a file's content); SSEMaxDuration bounds a
	// server-sent event stream. Zero sets no deadline.
	BodyTimeout    time.Duration
	UploadTimeout  time.Duration
	SSEMaxDuration time.Duration
	Metrics        *metrics.Metrics
	Log            *slog.Logger
	// Webhooks validates callbacks (nil: callbacks refused).
	Webhooks *webhook.Service
	// Batches serves files and batches (nil: not served).
	Batches *batch.Service
	// Ender ends the jobs ingress ends itself (a cancel).
	Ender *jobs.Ender

	// MaxUnauthenticatedConns bounds the connections of HTTPServer that have not yet
	// carried an authenticated request (0: no bound; see connGate).
	MaxUnauthenticatedConns int
	// MaxUnauthenticatedConnsPerSource is one source address's share of them (0: all);
	// UnauthenticatedIdle closes such a connection left idle that long (0: only
	// HTTPServer's idle timeout).
	MaxUnauthenticatedConnsPerSource int
	UnauthenticatedIdle              time.Duration
	// ChatBillableParams are the billable Chat parameters clients may send
	// (wire.BillableChatParams; none: each is refused with 400).
	ChatBillableParams []string

	// Records is the records bucket when it is bounded (nil: not checked): while it is
	// full, a tenant holding more than its share of it (RecordsShare) is refused
	// new jobs with 507 (quota.go).
	Records interface {
		Full(ctx context.Context) bool
		MaxBytes() int64
	}
	// RecordsTenants is how many tenants share the records bucket (at least 1).
	RecordsTenants int

	// Budgets are the tenants' spend budgets: a tenant whose budget is used up gets
	// 429 for new jobs (nil: no budgets).
	Budgets *spend.Budgets
	// MCP serves the Model Context Protocol at /mcp to authenticated callers
	// (pkg/ingress/mcp; see mcp.go).
	MCP bool
	// Console serves the web console's pages under /console/ (pkg/ingress/console).
	Console bool

	// MaxWebSockets bounds the Responses WebSockets this ingress holds open (0: 1024);
	// WebSocketIdle closes a socket with no response running for that long (0: 10
	// minutes), WebSocketMaxAge ends one open that long (0: 60 minutes). See
	// pkg/ingress/responsesws.
	MaxWebSockets   int
	WebSocketIdle   time.Duration
	WebSocketMaxAge time.Duration
}

// Server is the ingress. It keeps the Options it was made with; they are not changed
// afterwards.
type Server struct {
	Options

	pace    paces // the tenants' job durations, for Retry-After (retryafter.go)
	sockets *responsesws.Server
	mcp     http.Handler

	// events hands the jobs' events to the requests waiting for them (waiters.go).
	events waiters

	// eventsGate bounds the JetStream API calls that event streams make at once
	// (creating and deleting their consumers): a burst of streams queues here instead
	// of timing out together on a loaded server (see followEvents).
	eventsGate chan struct{}
}

// New returns the ingress o describes.
func New(o Options) *Server {
	s := &Server{Options: o, eventsGate: make(chan struct{}, eventsCallsAtOnce)}
	s.sockets = responsesws.New(responsesws.Options{Admit: s.admitSocket, Create: s.socketCreate, MaxSockets: o.MaxWebSockets,
		Idle: o.WebSocketIdle, MaxAge: o.WebSocketMaxAge, MaxMessage: o.MaxBody})
	if o.MCP {
		// The MCP tools call this API in process, with the caller's key; the API they
		// call does not itself route /mcp.
		s.mcp = mcp.New(mcp.Options{API: s.Handler(), Tools: o.Tools, Models: o.Models, MaxBody: o.MaxBody, Log: o.Log})
	}
	return s
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.auth(s.budgeted(openaichat.Client, jsonBody(openaichat.Client, s.protocolRequest(openaichat.Client, "job_")))))
	mux.HandleFunc("GET /v1/models", s.auth(s.listModels))
	mux.HandleFunc("POST /v1/jobs", s.auth(s.budgeted(openaichat.Client, jsonBody(openaichat.Client, s.createJob))))
	mux.HandleFunc("GET /v1/jobs/{id}", s.auth(loaded(s.loadJob, s.getJob)))
	mux.HandleFunc("GET /v1/jobs/{id}/events", s.auth(loaded(s.loadJob, s.jobEvents)))
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", s.auth(loaded(s.loadJob, s.cancelJob)))
	mux.HandleFunc("POST /v1/jobs/{id}/replay", s.auth(s.budgeted(openaichat.Client, loaded(s.loadJob, s.replayJob))))
	mux.HandleFunc("POST /v1/search", s.auth(s.budgeted(openaichat.Client, jsonBody(openaichat.Client, s.directSearch))))
	mux.HandleFunc("POST /v1/fetch", s.auth(s.budgeted(openaichat.Client, jsonBody(openaichat.Client, s.directFetch))))
	mux.HandleFunc("POST /v1/responses", s.authAs(responses.Client, s.budgeted(responses.Client, jsonBody(responses.Client, s.protocolRequest(responses.Client, "resp_")))))
	mux.Handle("GET /v1/responses", s.authAs(responses.Client, s.sockets.ServeHTTP))
	mux.HandleFunc("POST /v1/responses/compact", s.authAs(responses.Client, jsonBody(responses.Client, s.compactResponse)))
	mux.HandleFunc("GET /v1/responses/{id}", s.auth(s.getResponse))
	mux.HandleFunc("DELETE /v1/responses/{id}", s.authAs(responses.Client, s.deleteResponse))
	mux.HandleFunc("POST /v1/responses/{id}/cancel", s.authAs(responses.Client, s.cancelResponse))
	mux.HandleFunc("GET /v1/responses/{id}/input_items", s.authAs(responses.Client, s.inputItems))
	mux.HandleFunc("POST /v1/conversations", s.authAs(responses.Client, jsonBody(responses.Client, s.createConversation)))
	mux.HandleFunc("GET /v1/conversations/{id}", s.authAs(responses.Client, loaded(s.loadConversation, s.getConversation)))
	mux.HandleFunc("POST /v1/conversations/{id}", s.authAs(responses.Client, jsonBody(responses.Client, loaded(s.loadConversation, s.updateConversation))))
	mux.HandleFunc("DELETE /v1/conversations/{id}", s.authAs(responses.Client, loaded(s.loadConversation, s.deleteConversation)))
	mux.HandleFunc("GET /v1/conversations/{id}/items", s.authAs(responses.Client, loaded(s.loadConversation, s.listConversationItems)))
	mux.HandleFunc("POST /v1/conversations/{id}/items", s.authAs(responses.Client, jsonBody(responses.Client, loaded(s.loadConversation, s.addConversationItems))))
	mux.HandleFunc("GET /v1/conversations/{id}/items/{item_id}", s.authAs(responses.Client, loaded(s.loadConversation, s.getConversationItem)))
	mux.HandleFunc("DELETE /v1/conversations/{id}/items/{item_id}", s.authAs(responses.Client, loaded(s.loadConversation, s.deleteConversationItem)))
	mux.HandleFunc("POST /v1/messages", s.authAs(anthropic.Client, s.budgeted(anthropic.Client, jsonBody(anthropic.Client, s.protocolRequest(anthropic.Client, "msg_")))))
	if s.Batches != nil {
		mux.HandleFunc("POST /v1/files", s.auth(s.upload(s.uploadFile)))
		mux.HandleFunc("GET /v1/files", s.auth(s.listFiles))
		mux.HandleFunc("GET /v1/files/{id}", s.auth(loaded(s.loadFile, s.getFile)))
		mux.HandleFunc("GET /v1/files/{id}/content", s.auth(loaded(s.loadFile, s.fileContent)))
		mux.HandleFunc("DELETE /v1/files/{id}", s.auth(loaded(s.loadFile, s.deleteFile)))
		mux.HandleFunc("POST /v1/batches", s.auth(s.budgeted(openaichat.Client, jsonBody(openaichat.Client, s.createBatch))))
		mux.HandleFunc("GET /v1/batches", s.auth(s.listBatches))
		mux.HandleFunc("GET /v1/batches/{id}", s.auth(s.getBatch))
		mux.HandleFunc("POST /v1/batches/{id}/cancel", s.auth(s.cancelBatch))
		mux.HandleFunc("GET /v1/batches/{id}/events", s.auth(s.batchEvents))
	}
	mux.HandleFunc("POST /v1/research", s.auth(s.budgeted(openaichat.Client, jsonBody(openaichat.Client, s.createResearch))))
	mux.HandleFunc("GET /v1/research", s.auth(s.listResearch))
	mux.HandleFunc("GET /v1/research/agents", s.auth(s.listResearchAgents))
	mux.HandleFunc("POST /v1/research/agents/{name}/webhook", s.researchAgentWebhook)
	mux.HandleFunc("GET /v1/research/{id}", s.auth(loaded(s.loadRun, s.getResearch)))
	mux.HandleFunc("GET /v1/research/{id}/events", s.auth(loaded(s.loadRun, s.researchEvents)))
	mux.HandleFunc("POST /v1/research/{id}/cancel", s.auth(loaded(s.loadRun, s.cancelResearch)))
	mux.HandleFunc("POST /v1/research/{id}/plan", s.auth(jsonBody(openaichat.Client, loaded(s.loadRun, s.planResearch))))
	mux.HandleFunc("GET /v1/usage", s.auth(s.usage))
	if s.mcp != nil {
		mux.Handle("/mcp", s.mcpRoute())
	}
	// The console's pages, and the read routes they use (console_api.go).
	if s.Console {
		mux.Handle("GET /console/", console.Pages())
	}
	mux.HandleFunc("GET /v1/jobs", s.auth(s.listJobs))
	mux.HandleFunc("GET /v1/jobs/{id}/request", s.auth(loaded(s.loadJob, s.jobRequest)))
	mux.HandleFunc("GET /v1/usage/daily", s.auth(s.dailyUsage))
	mux.HandleFunc("GET /v1/engines", s.auth(s.engineHealth))
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", (&Ops{Bus: s.Bus, Store: s.Store.Health, Log: s.Log}).readyz)
	// With tenants the API port is public: metrics (tenants, models, costs) are
	// served only on the internal listener, FLEET_METRICS_ADDR (Ops).
	if s.Metrics != nil && s.Tenants == nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	}
	return trace.Middleware(s.observe(s.deadlines(crossOrigin(routed(mux)))))
}

// crossOrigin refuses browser requests from another site that change something (any
// method but GET, HEAD and OPTIONS), by Sec-Fetch-Site or else by an Origin foreign
// to Host (http.CrossOriginProtection). A browser sends a body-less or form POST
// cross-site without asking first, so without this a web page could cancel a job on
// an open API. API clients send neither header and are not affected.
func crossOrigin(next http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeWireError(w, codecFor(r.URL.Path), &wire.Error{Status: http.StatusForbidden, Type: "permission_error", Code: "cross_origin_request",
			Message: "Cross-origin browser requests are refused; call the API from a server or a same-origin page."})
	}))
	return p.Handler(next)
}

// codecFor is the client protocol whose error shape answers path: Anthropic's for
// /v1/messages, the OpenAI shape for every other route.
func codecFor(path string) wire.ClientCodec {
	switch {
	case strings.HasPrefix(path, "/v1/messages"):
		return anthropic.Client
	case strings.HasPrefix(path, "/v1/responses"):
		return responses.Client
	}
	return openaichat.Client
}

// routed serves the mux's routes and answers the rest in the API's error shape: a
// path no route has is 404; a path that routes only for other methods is 405 with
// Allow listing them.
func routed(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		var allow []string
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) == 0 {
			writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			fmt.Sprintf("%s is not allowed on %s; use %s.", r.Method, r.URL.Path, strings.Join(allow, " or ")))
	})
}

// jsonBody refuses a request whose body is not declared JSON (415 in codec's error
// shape). A browser can send a cross-origin POST without asking first only as
// text/plain, form or multipart; requiring application/json (or a +json type) keeps
// such a request from submitting jobs.
func jsonBody(codec wire.ClientCodec, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			writeWireError(w, codec, &wire.Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
				Message: "Send the request body as JSON with 'Content-Type: application/json'."})
			return
		}
		h(w, r)
	}
}

// loaded serves h with what load reads for the request (the job, run, file or
// conversation its path names); load has answered when it returns nil.
func loaded[T any](load func(http.ResponseWriter, *http.Request) *T, h func(http.ResponseWriter, *http.Request, *T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := load(w, r); v != nil {
			h(w, r, v)
		}
	}
}

// readBody reads a bounded body; it has answered the request (in the OpenAI shape)
// when it returns false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, e := s.boundedBody(w, r)
	if e != nil {
		writeAPIError(w, e)
		return nil, false
	}
	return body, true
}

// boundedBody reads a body of at most MaxBody bytes; the error says why it could not.
func (s *Server) boundedBody(w http.ResponseWriter, r *http.Request) ([]byte, *wire.Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &wire.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("Request body exceeds the limit of %d bytes.", s.MaxBody)}
	case err != nil:
		return nil, wire.Invalid("", "Could not read the request body: %s", bodyError(err))
	}
	return body, nil
}

// Tenants maps API keys to tenants.
type Tenants struct {
	byKeyHash map[[32]byte]string
}

// NewTenants maps each tenant's resolved keys (config.File.Resolve fills APIKeys
// from the variable the config names) to the tenant. Keys are kept only as hashes.
func NewTenants(ts []config.Tenant) (*Tenants, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	t := &Tenants{byKeyHash: map[[32]byte]string{}}
	for _, tc := range ts {
		if len(tc.APIKeys) == 0 {
			return nil, fmt.Errorf("tenant %s: no API keys (%s not resolved)", tc.ID, tc.APIKeyEnv)
		}
		for _, k := range tc.APIKeys {
			t.byKeyHash[sha256.Sum256([]byte(k))] = tc.ID
		}
	}
	return t, nil
}

// of is the tenant whose key r carries, as "Authorization: Bearer <key>" or
// "x-api-key: <key>"; false for a missing or unknown key.
func (t *Tenants) of(r *http.Request) (string, bool) {
	key := cmp.Or(bearer(r.Header.Get("Authorization")), strings.TrimSpace(r.Header.Get("X-Api-Key")))
	tenant, ok := t.byKeyHash[sha256.Sum256([]byte(key))]
	return tenant, key != "" && ok
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return s.authAs(openaichat.Client, h)
}

// authAs authenticates by "Authorization: Bearer <key>" (the scheme in any case) or
// "x-api-key: <key>" and answers a missing or unknown key in codec's error shape. No
// body has been read when it runs (deadlines): an unauthenticated request is answered
// at once.
func (s *Server) authAs(codec wire.ClientCodec, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Tenants != nil {
			tenant, ok := s.Tenants.of(r)
			if !ok {
				writeWireError(w, codec, &wire.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
					Message: "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'."})
				return
			}
			r = r.WithContext(withTenant(r.Context(), tenant))
		}
		authenticated(r)
		if s.allowRate(w, r, codec, tenantOf(r)) {
			h(w, r)
		}
	}
}

// bearer returns the token of an Authorization header of the Bearer scheme, whose
// name is case-insensitive (RFC 9110, section 11.1): "" for another scheme.
func bearer(authorization string) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observe counts requests and turns a panic into a 500 in the API's error shape.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.Log.Error("api: handler panicked", "path", r.URL.Path, "panic", p)
				if rec.status == 0 {
					writeError(rec, http.StatusInternalServerError, "server_error", "", "", "Internal error.")
				}
			}
			if s.Metrics != nil {
				route := cmp.Or(r.Pattern, "unmatched")
				s.Metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(cmp.Or(rec.status, http.StatusOK))).Inc()
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// logFailure logs a failed call to Redis or NATS made for a request: at ERROR, unless
// the client has hung up (the request's context ended the call), which is no server
// error and is logged at INFO.
func (s *Server) logFailure(ctx context.Context, msg string, args ...any) {
	if ctx.Err() != nil {
		s.Log.Info(msg+": the client left", args...)
		return
	}
	s.Log.Error(msg, args...)
}

// validJobID reports whether id could be one of ours (and is a safe subject token).
func validJobID(id string) bool {
	if len(id) < 5 || len(id) > 64 {
		return false
	}
	return !strings.ContainsFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_')
	})
}
