// Package config reads the fleet's configuration: process settings from the
// environment (Env, through caarlos0/env), and providers, model routes and web search
// engines from one JSON file (File) whose webSearch section keeps the seed's shape.
// API keys are never in either: the file names the environment variables that hold
// them.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/llm/openaichat"
	"github.com/searchfleet/searchfleet/pkg/spend"
)

// Env are the process settings. Every field is an environment variable; the defaults
// suit one machine.
type Env struct {
	// HTTPAddr is where ingress listens.
	HTTPAddr string `env:"FLEET_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	// NATSURL is the NATS server ("embedded" runs one in-process: the all-in-one default).
	NATSURL string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	// RedisURL is the Redis server. Empty in the all-in-one process means: a local
	// redis-server if one answers or can be started, else an in-process stand-in.
	RedisURL string `env:"REDIS_URL"`
	// ConfigFile is the providers/models/webSearch file.
	ConfigFile string `env:"FLEET_CONFIG"`
	// DataDir holds the embedded NATS server's JetStream store (all-in-one only).
	DataDir string `env:"FLEET_DATA_DIR" envDefault:".data"`
	// KeyPrefix prefixes every Redis key, so fleets can share a Redis.
	KeyPrefix string `env:"FLEET_REDIS_PREFIX" envDefault:"sf"`
	// Retention is how long job records are kept (at most 720h): a record holds the
	// request body (up to MaxBodyBytes) and the answer. Batch records and the files a
	// batch writes are kept this long after the batch ends.
	Retention time.Duration `env:"FLEET_JOB_RETENTION" envDefault:"168h"`
	// JobTimeout bounds a whole job; past it the job fails visibly.
	JobTimeout time.Duration `env:"FLEET_JOB_TIMEOUT" envDefault:"5m"`
	// ResearchTimeout bounds a research run whose budget names no deadline (its
	// children share the run's deadline).
	ResearchTimeout time.Duration `env:"FLEET_RESEARCH_TIMEOUT" envDefault:"30m"`
	// ResearchAgentPoll is how often a research run carried out by a provider's agent
	// polls the provider.
	ResearchAgentPoll time.Duration `env:"FLEET_RESEARCH_AGENT_POLL" envDefault:"10s"`
	// PublicURL is the fleet's base URL as providers reach it ("https://fleet.example"):
	// a research agent whose provider takes a webhook URL per run (Parallel) is given
	// <PublicURL>/v1/research/agents/<name>/webhook. Empty: such runs are polled only.
	PublicURL string `env:"FLEET_PUBLIC_URL"`
	// ModelTimeout bounds one main-model call.
	ModelTimeout time.Duration `env:"FLEET_MODEL_TIMEOUT" envDefault:"120s"`
	// EngineTimeout bounds one search engine call.
	EngineTimeout time.Duration `env:"FLEET_ENGINE_TIMEOUT" envDefault:"45s"`
	// AckWait is how long a delivery may go unacknowledged before another worker gets
	// it: how quickly a dead worker's message moves on. Running handlers keep theirs
	// alive with heartbeats every AckWait/3.
	AckWait time.Duration `env:"FLEET_ACK_WAIT" envDefault:"30s"`
	// ChatConcurrency is how many chat steps a chat worker runs at once.
	ChatConcurrency int `env:"FLEET_CHAT_CONCURRENCY" envDefault:"256"`
	// ChatInFlight bounds the chat steps of one lane (a tenant's new jobs or resumes of
	// one band) in flight across ALL chat workers (the lane consumers'
	// MaxAckPending): every chat worker must set the same value, as the last one to
	// start writes it into the consumers.
	ChatInFlight int `env:"FLEET_CHAT_MAX_IN_FLIGHT" envDefault:"4096"`
	// BatchConcurrency is how many batch jobs a chat worker runs at once.
	BatchConcurrency int `env:"FLEET_BATCH_CONCURRENCY" envDefault:"16"`
	// BatchRate bounds how many batch jobs a chat worker starts per second (0: no
	// limit), so a batch leaves CPU for interactive requests however fast its providers
	// answer. With real provider latency BatchConcurrency binds first.
	BatchRate float64 `env:"FLEET_BATCH_RATE" envDefault:"50"`
	// MaxFileBytes bounds an uploaded batch input file.
	MaxFileBytes int64 `env:"FLEET_MAX_FILE_BYTES" envDefault:"209715200"`
	// SearchConcurrency is how many searches a search worker runs at once per engine.
	SearchConcurrency int `env:"FLEET_SEARCH_CONCURRENCY" envDefault:"64"`
	// Engines limits a search worker to these engine ids (empty: all configured).
	Engines []string `env:"FLEET_ENGINES" envSeparator:","`
	// MaxHops bounds model calls per job; the last hop is offered no web_search, so the
	// model has to answer. Clients cannot raise it.
	MaxHops int `env:"FLEET_MAX_HOPS" envDefault:"6"`
	// MaxSearches bounds web_search calls per job. Clients cannot raise it.
	MaxSearches int `env:"FLEET_MAX_SEARCHES" envDefault:"12"`
	// MaxFetches bounds web_fetch calls per job (0: web_fetch is not offered). A
	// request may lower it, never raise it.
	MaxFetches int `env:"FLEET_MAX_FETCHES" envDefault:"5"`
	// FetchMaxBytes caps the body web_fetch reads of a page; FetchTimeout bounds one
	// fetch, redirects included.
	FetchMaxBytes int64         `env:"FLEET_FETCH_MAX_BYTES" envDefault:"2097152"`
	FetchTimeout  time.Duration `env:"FLEET_FETCH_TIMEOUT" envDefault:"15s"`
	// FetchAllow lists CIDRs web_fetch may reach although they are private or
	// loopback (tests allow loopback; empty in production: public addresses only).
	FetchAllow []string `env:"FLEET_FETCH_ALLOW" envSeparator:","`
	// HTTPHeaderTimeout bounds reading a request's headers: a client that never
	// finishes them (slowloris) is cut off.
	HTTPHeaderTimeout time.Duration `env:"FLEET_HTTP_HEADER_TIMEOUT" envDefault:"10s"`
	// HTTPIdleTimeout is how long an idle keep-alive connection is kept open.
	HTTPIdleTimeout time.Duration `env:"FLEET_HTTP_IDLE_TIMEOUT" envDefault:"60s"`
	// HTTPBodyTimeout bounds reading a request body (from the end of its headers); a
	// body trickled slower is refused and its connection closed.
	HTTPBodyTimeout time.Duration `env:"FLEET_HTTP_BODY_TIMEOUT" envDefault:"30s"`
	// HTTPUploadTimeout replaces HTTPBodyTimeout for multipart uploads (POST
	// /v1/files, up to FLEET_MAX_FILE_BYTES) and bounds sending a file's content.
	HTTPUploadTimeout time.Duration `env:"FLEET_HTTP_UPLOAD_TIMEOUT" envDefault:"10m"`
	// HTTPMaxUnauthenticatedConns bounds the ingress connections that have not yet
	// carried an authenticated request (from accept until a request on them presents a
	// known API key, or they close). A connection accepted beyond it is answered 503
	// and closed before its request is read; 0 sets no bound.
	HTTPMaxUnauthenticatedConns int `env:"FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS" envDefault:"1024"`
	// HTTPMaxUnauthenticatedConnsPerSource is one source's share of them (an IPv4
	// address, an IPv6 /64; 0: the whole bound); HTTPUnauthenticatedIdle closes such a
	// connection left idle that long.
	HTTPMaxUnauthenticatedConnsPerSource int           `env:"FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS_PER_SOURCE" envDefault:"64"`
	HTTPUnauthenticatedIdle              time.Duration `env:"FLEET_HTTP_UNAUTHENTICATED_IDLE_TIMEOUT" envDefault:"5s"`
	// ChatBillableParams lists the Chat request parameters that change what the model
	// provider bills which clients may send: service_tier (other than "default"),
	// audio (audio output), store (stored completions and their metadata),
	// prediction (predicted outputs). Empty (the default): each is refused with 400.
	ChatBillableParams []string `env:"FLEET_CHAT_BILLABLE_PARAMS" envSeparator:","`
	// SSEMaxDuration bounds one server-sent event stream (streamed answers, job
	// events); keep-alive comments are sent every 10-15 s while it is open.
	SSEMaxDuration time.Duration `env:"FLEET_SSE_MAX_DURATION" envDefault:"30m"`
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64 `env:"FLEET_MAX_BODY_BYTES" envDefault:"4194304"`
	// WebhookSchedule is the wait before each retry of a callback delivery: a delivery
	// gets one try more than the schedule has entries, then goes to the DLQ and its
	// job shows webhook_failed.
	WebhookSchedule []time.Duration `env:"FLEET_WEBHOOK_SCHEDULE" envDefault:"5s,30s,2m,10m,30m,1h,2h,4h" envSeparator:","`
	// WebhookAllow lists CIDRs callbacks may reach although they are private,
	// loopback or link-local (e.g. 10.0.0.0/8 for receivers inside your network).
	WebhookAllow []string `env:"FLEET_WEBHOOK_ALLOW" envSeparator:","`
	// WebhookTimeout bounds one delivery attempt.
	WebhookTimeout time.Duration `env:"FLEET_WEBHOOK_TIMEOUT" envDefault:"10s"`
	// WebhookTenantInFlight caps one tenant's deliveries in progress at once in one
	// ingress (of its pool of WebhookPool); a tenant's deliveries past it wait on the
	// WEBHOOKS stream, so one tenant's slow receivers never hold every worker.
	WebhookTenantInFlight int `env:"FLEET_WEBHOOK_TENANT_IN_FLIGHT" envDefault:"8"`
	// WebhookHostInFlight caps one destination host's deliveries in progress at once
	// in one ingress. A host that fails or times out gets half as many (down to 1) and
	// one more for each delivery it answers with a 2xx, up to this cap.
	WebhookHostInFlight int `env:"FLEET_WEBHOOK_HOST_IN_FLIGHT" envDefault:"16"`
	// WebhookDefer is the wait before a delivery held back by a cap is tried again
	// (jittered, and longer the more often the same delivery was held back, up to 8x).
	WebhookDefer time.Duration `env:"FLEET_WEBHOOK_DEFER" envDefault:"1s"`
	// WebhookPool is how many deliveries one ingress makes at once, all tenants
	// together.
	WebhookPool int `env:"FLEET_WEBHOOK_POOL" envDefault:"64"`
	// DrainTimeout bounds graceful shutdown.
	DrainTimeout time.Duration `env:"FLEET_DRAIN_TIMEOUT" envDefault:"30s"`
	// NATSReplicas is the stream replica count (3 in a NATS cluster).
	NATSReplicas int `env:"FLEET_NATS_REPLICAS" envDefault:"1"`
	// EventsMaxBytes bounds the EVENTS stream (the oldest events go first). JetStream
	// reserves it on every replica's storage when the stream is made, so fleets in many
	// namespaces on one server may want less than the 4 GiB default.
	EventsMaxBytes int64 `env:"FLEET_EVENTS_MAX_BYTES" envDefault:"4294967296"`
	// RecordsMaxBytes bounds the records bucket (ended jobs' records): a full bucket
	// refuses new records, which stay in Redis until they expire, and leaves the
	// JetStream store the JOBS and EVENTS streams need. The 4 GiB default holds 16
	// tenants at the default storage quota; 0: no bound.
	RecordsMaxBytes int64 `env:"FLEET_RECORDS_MAX_BYTES" envDefault:"4294967296"`
	// LogLevel is debug, info, warn or error; LogFormat is text or json.
	LogLevel  string `env:"FLEET_LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"FLEET_LOG_FORMAT" envDefault:"text"`
	// Namespace prefixes every stream, consumer, subject and object store of the fleet
	// on NATS, and its Redis keys, so several fleets share one NATS server and one
	// Redis without seeing each other's work. Empty (the default) keeps the
	// un-namespaced names, those of deploy/nats/.
	Namespace string `env:"FLEET_NAMESPACE"`
	// MetricsAddr is the internal listener of every role process: /metrics, /healthz
	// and /readyz (e.g. :9090). Empty: none (the ingress still serves /metrics on its
	// API port while no tenants are configured).
	MetricsAddr string `env:"FLEET_METRICS_ADDR"`
	// Pprof also serves Go's profiles (/debug/pprof/) on FLEET_METRICS_ADDR, for
	// finding where a process's memory or CPU goes. Off by default: profiles show
	// the process's internals, so the listener must stay internal.
	Pprof bool `env:"FLEET_PPROF"`
	// TenantLimits are the per-tenant limits of every tenant that sets none of its
	// own, and of the open API (FLEET_TENANT_RPS, _BURST, _SYNC_WAITS, _STREAMS,
	// _QUEUED_JOBS, _BATCHES, _FILES, _FILE_BYTES, _STORAGE_BYTES; 0: no limit).
	TenantLimits Limits `envPrefix:"FLEET_TENANT_"`
	// FileExpiry is how long an uploaded file is kept when its upload names no
	// expires_after; FilesMaxBytes bounds the FLEET_FILES object store as a whole (a
	// full store refuses uploads with 507 and cannot take the space of the JOBS and
	// EVENTS streams). Produced batch files are kept as long as their batch.
	FileExpiry    time.Duration `env:"FLEET_FILE_EXPIRY" envDefault:"720h"`
	FilesMaxBytes int64         `env:"FLEET_FILES_MAX_BYTES" envDefault:"10737418240"`
	// Failpoint names a point of a chat step at which a chat worker exits with status
	// 3 (e.g. chat.after_dispatch). For the crash tests only; empty in production.
	Failpoint string `env:"FLEET_FAILPOINT"`
	// DefaultBudget is the spend budget of every tenant whose config entry sets none,
	// and of the open API's one tenant (zero: no limit, spend is only recorded).
	DefaultBudget spend.Budget `envPrefix:"FLEET_TENANT_BUDGET_"`
	// EvidenceSecret keys the delimiters search results and fetched pages are wrapped
	// in for the model (at least 32 characters; every chat worker of a fleet needs the
	// same). Unset: each process makes a random one at start and warns, which is
	// safe but renders a job's evidence differently on each worker (a provider's
	// prompt cache then misses across workers). Never logged.
	EvidenceSecret string `env:"FLEET_EVIDENCE_SECRET"`
	// ReasoningSecrets key the seal of the reasoning state a Responses client asks for
	// (include reasoning.encrypted_content) and sends back on a later turn: comma
	// separated, each at least 32 characters; the first seals, every one opens (keep a
	// retired secret listed after the new one while its seals are in use). Every
	// ingress of a fleet needs the same. Unset: DevReasoningSecret (ReasoningSeal),
	// which is public, and the process warns. Never logged.
	ReasoningSecrets []string `env:"FLEET_REASONING_SECRET" envSeparator:","`
}

// DevReasoningSecret is FLEET_REASONING_SECRET's default, for make run and tests.
const DevReasoningSecret = "searchfleet-development-reasoning-seal-secret"

// ReasoningSeal returns the secrets of FLEET_REASONING_SECRET, and whether they are
// the development default (it was unset).
func (e Env) ReasoningSeal() (secrets []string, dev bool) {
	if len(e.ReasoningSecrets) == 0 {
		return []string{DevReasoningSecret}, true
	}
	return e.ReasoningSecrets, false
}

// LoadEnv parses and validates the process environment.
func LoadEnv() (Env, error) { return LoadEnvFrom(nil) }

// LoadEnvFrom parses and validates environ (variable → value) as the environment;
// nil means the process environment. Tests use it instead of os.Setenv.
func LoadEnvFrom(environ map[string]string) (Env, error) {
	e, err := env.ParseAsWithOptions[Env](env.Options{Environment: environ})
	if err != nil {
		return e, fmt.Errorf("config: %w", err)
	}
	return e, e.Validate()
}

// Validate checks the cross-field rules; each message names the variable.
func (e Env) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if e.AckWait < 3*time.Second {
		bad("FLEET_ACK_WAIT must be at least 3s (got %s)", e.AckWait)
	}
	if e.EngineTimeout <= 0 || e.EngineTimeout >= e.JobTimeout {
		bad("FLEET_ENGINE_TIMEOUT (%s) must be positive and shorter than FLEET_JOB_TIMEOUT (%s)", e.EngineTimeout, e.JobTimeout)
	}
	if e.ModelTimeout <= 0 || e.ModelTimeout >= e.JobTimeout {
		bad("FLEET_MODEL_TIMEOUT (%s) must be positive and shorter than FLEET_JOB_TIMEOUT (%s)", e.ModelTimeout, e.JobTimeout)
	}
	if e.MaxHops < 1 || e.MaxHops > 50 {
		bad("FLEET_MAX_HOPS must be 1..50 (got %d)", e.MaxHops)
	}
	if e.BatchRate < 0 {
		bad("FLEET_BATCH_RATE must not be negative (0: no limit)")
	}
	if e.MaxSearches < 0 {
		bad("FLEET_MAX_SEARCHES must not be negative")
	}
	for name, n := range map[string]int{
		"FLEET_CHAT_MAX_IN_FLIGHT":       e.ChatInFlight,
		"FLEET_CHAT_CONCURRENCY":         e.ChatConcurrency,
		"FLEET_BATCH_CONCURRENCY":        e.BatchConcurrency,
		"FLEET_SEARCH_CONCURRENCY":       e.SearchConcurrency,
		"FLEET_WEBHOOK_TENANT_IN_FLIGHT": e.WebhookTenantInFlight,
		"FLEET_WEBHOOK_HOST_IN_FLIGHT":   e.WebhookHostInFlight,
		"FLEET_WEBHOOK_POOL":             e.WebhookPool,
	} {
		if n < 1 {
			bad("%s must be at least 1 (got %d)", name, n)
		}
	}
	if e.WebhookDefer <= 0 {
		bad("FLEET_WEBHOOK_DEFER must be positive (e.g. 1s)")
	}
	if len(e.WebhookSchedule) == 0 {
		bad("FLEET_WEBHOOK_SCHEDULE needs at least one wait (e.g. 5s,30s,2m)")
	}
	for _, c := range e.WebhookAllow {
		if _, err := netip.ParsePrefix(c); err != nil {
			bad("FLEET_WEBHOOK_ALLOW: %q is not a CIDR (e.g. 127.0.0.0/8)", c)
		}
	}
	for _, c := range e.FetchAllow {
		if _, err := netip.ParsePrefix(c); err != nil {
			bad("FLEET_FETCH_ALLOW: %q is not a CIDR (e.g. 127.0.0.0/8)", c)
		}
	}
	if e.MaxFetches < 0 || e.FetchMaxBytes < 1024 || e.FetchTimeout <= 0 {
		bad("FLEET_MAX_FETCHES must be at least 0, FLEET_FETCH_MAX_BYTES at least 1024 and FLEET_FETCH_TIMEOUT positive")
	}
	if e.RecordsMaxBytes < 0 {
		bad("FLEET_RECORDS_MAX_BYTES must be at least 0 (0: no bound)")
	}
	if e.EventsMaxBytes < 1<<20 {
		bad("FLEET_EVENTS_MAX_BYTES must be at least 1 MiB")
	}
	if e.MaxBodyBytes < 1024 {
		bad("FLEET_MAX_BODY_BYTES must be at least 1024")
	}
	for name, d := range map[string]time.Duration{"FLEET_HTTP_HEADER_TIMEOUT": e.HTTPHeaderTimeout, "FLEET_HTTP_IDLE_TIMEOUT": e.HTTPIdleTimeout,
		"FLEET_HTTP_BODY_TIMEOUT": e.HTTPBodyTimeout, "FLEET_HTTP_UPLOAD_TIMEOUT": e.HTTPUploadTimeout, "FLEET_HTTP_UNAUTHENTICATED_IDLE_TIMEOUT": e.HTTPUnauthenticatedIdle} {
		if d <= 0 {
			bad("%s must be positive (got %s)", name, d)
		}
	}
	for _, p := range e.ChatBillableParams {
		if !slices.Contains(openaichat.BillableParams, p) {
			bad("FLEET_CHAT_BILLABLE_PARAMS: %q is not one of %s", p, strings.Join(openaichat.BillableParams, ", "))
		}
	}
	if e.HTTPMaxUnauthenticatedConns < 0 {
		bad("FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS must be at least 0 (0: no bound)")
	}
	if e.HTTPMaxUnauthenticatedConnsPerSource < 0 {
		bad("FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS_PER_SOURCE must be at least 0 (0: the whole bound)")
	}
	if e.HTTPUploadTimeout < e.HTTPBodyTimeout {
		bad("FLEET_HTTP_UPLOAD_TIMEOUT (%s) must not be shorter than FLEET_HTTP_BODY_TIMEOUT (%s)", e.HTTPUploadTimeout, e.HTTPBodyTimeout)
	}
	if e.SSEMaxDuration <= e.JobTimeout {
		bad("FLEET_SSE_MAX_DURATION (%s) must exceed FLEET_JOB_TIMEOUT (%s), so a stream can follow a whole job", e.SSEMaxDuration, e.JobTimeout)
	}
	e.TenantLimits.validate(bad)
	if e.FileExpiry < time.Minute {
		bad("FLEET_FILE_EXPIRY must be at least 1m")
	}
	if e.FilesMaxBytes < 1<<20 {
		bad("FLEET_FILES_MAX_BYTES must be at least 1 MiB")
	}
	if e.Retention < time.Minute || e.Retention > 720*time.Hour {
		bad("FLEET_JOB_RETENTION must be from 1m to 720h (got %s)", e.Retention)
	}
	switch e.LogFormat {
	case "text", "json":
	default:
		bad("FLEET_LOG_FORMAT must be text or json")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(e.LogLevel)); err != nil {
		bad("FLEET_LOG_LEVEL must be debug, info, warn or error")
	}
	if err := bus.ValidateNamespace(e.Namespace); err != nil {
		bad("FLEET_NAMESPACE: %v", err)
	}
	if err := e.DefaultBudget.Validate(); err != nil {
		bad("FLEET_TENANT_BUDGET_*: %v", err)
	}
	for _, secret := range e.ReasoningSecrets {
		if len(secret) < 32 {
			bad("FLEET_REASONING_SECRET: each secret must be at least 32 characters (got %d)", len(secret))
		}
	}
	if e.EvidenceSecret != "" && len(e.EvidenceSecret) < 32 {
		bad("FLEET_EVIDENCE_SECRET must be at least 32 characters (got %d)", len(e.EvidenceSecret))
	}
	if e.RedisURL != "" {
		if _, err := url.Parse(e.RedisURL); err != nil || !strings.HasPrefix(e.RedisURL, "redis") {
			bad("REDIS_URL must be a redis:// or rediss:// URL")
		}
	}
	return errors.Join(errs...)
}

// Logger builds the process logger.
func (e Env) Logger() *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(e.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if e.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(logWriter, opts))
	}
	return slog.New(slog.NewTextHandler(logWriter, opts))
}

// LogValue is the redacted form of the settings, for the one log line at start.
func (e Env) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("http_addr", e.HTTPAddr),
		slog.String("nats_url", redact.URL(e.NATSURL)),
		slog.String("redis_url", redact.URL(e.RedisURL)),
		slog.String("config_file", e.ConfigFile),
		slog.String("redis_prefix", e.KeyPrefix),
		slog.String("namespace", e.Namespace),
		slog.String("metrics_addr", e.MetricsAddr),
		slog.Duration("job_timeout", e.JobTimeout),
		slog.Duration("model_timeout", e.ModelTimeout),
		slog.Duration("engine_timeout", e.EngineTimeout),
		slog.Duration("ack_wait", e.AckWait),
		slog.Int("chat_concurrency", e.ChatConcurrency),
		slog.Int("search_concurrency", e.SearchConcurrency),
		slog.Int("max_hops", e.MaxHops),
		slog.Int("max_searches", e.MaxSearches),
		slog.Int("max_fetches", e.MaxFetches),
		slog.Any("engines", e.Engines),
		slog.Duration("http_body_timeout", e.HTTPBodyTimeout),
		slog.Duration("http_upload_timeout", e.HTTPUploadTimeout),
		slog.Int("http_max_unauthenticated_conns", e.HTTPMaxUnauthenticatedConns),
		slog.Int("http_max_unauthenticated_conns_per_source", e.HTTPMaxUnauthenticatedConnsPerSource),
		slog.Duration("http_unauthenticated_idle_timeout", e.HTTPUnauthenticatedIdle),
		slog.Duration("sse_max_duration", e.SSEMaxDuration),
	)
}
