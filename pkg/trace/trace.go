// Package trace is the fleet's OpenTelemetry tracing: off until the standard OTEL_*
// environment says where to send spans, then one trace per job across the ingress,
// the chat and search workers and the finish hooks, its context carried in NATS
// message headers (W3C traceparent/tracestate; pkg/bus injects and extracts them).
//
// Off, every function here returns at once: Start hands back its context and a
// no-op span without allocating, Inject writes no header. Callers that build span
// attributes check the span's IsRecording first.
package trace

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Environment variables of the fleet's own (the OTEL_* ones are the SDK's).
const (
	// EnvContent, "true", puts prompt and answer text on model spans
	// (gen_ai.input.messages, gen_ai.output.messages): the name the OpenTelemetry
	// GenAI instrumentations use. Off by default: spans carry no content.
	EnvContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	// EnvQueries, "true", puts a search's query on its span.
	EnvQueries = "FLEET_TRACE_QUERIES"
	// EnvUI is a trace UI's address with {trace_id} where a trace's id goes
	// (http://jaeger:16686/trace/{trace_id}): the console links a job to its trace.
	EnvUI = "FLEET_TRACE_UI_URL"
	// HeaderTraceID is the response header the ingress returns a request's trace id
	// in (32 hex digits), when tracing is on.
	HeaderTraceID = "X-Trace-Id"
)

// The process's tracing: set by the first Setup, cleared by the last shutdown (a
// test runs several fleets in one process). on is read on every hot path: an atomic
// load, and nothing more when it is false.
var (
	on       atomic.Bool
	content  atomic.Bool
	queries  atomic.Bool
	current  atomic.Pointer[oteltrace.Tracer]
	mu       sync.Mutex // Setup and shutdown
	users    int
	provider *sdktrace.TracerProvider
	prop     = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	noopSpan = oteltrace.SpanFromContext(context.Background())
)

func tracer() oteltrace.Tracer { return *current.Load() }

// On reports whether tracing is on in this process.
func On() bool { return on.Load() }

// Enabled reports whether getenv configures tracing: an OTLP endpoint is named
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or
// OTEL_TRACES_EXPORTER=otlp, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise.
func Enabled(getenv func(string) string) bool {
	if b, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); b {
		return false
	}
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "otlp":
		return true
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup turns tracing on when the environment configures it (Enabled), for a
// process whose role is service (the service.name unless OTEL_SERVICE_NAME says
// another). The exporter is OTLP over HTTP/protobuf, or gRPC with
// OTEL_EXPORTER_OTLP_PROTOCOL (or _TRACES_PROTOCOL) =grpc; endpoint, headers,
// timeout, the sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on), the
// batching (OTEL_BSP_*) and the resource (OTEL_RESOURCE_ATTRIBUTES) are the SDK's
// own settings. The returned shutdown flushes what is buffered; with tracing off it
// does nothing.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	if !Enabled(os.Getenv) {
		return func(context.Context) error { return nil }, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if provider == nil {
		if provider, err = newProvider(ctx, service); err != nil {
			return nil, err
		}
		otel.SetTracerProvider(provider)
		otel.SetTextMapPropagator(prop)
		t := provider.Tracer("github.com/searchfleet/searchfleet")
		current.Store(&t)
		b, _ := strconv.ParseBool(os.Getenv(EnvContent))
		content.Store(b)
		b, _ = strconv.ParseBool(os.Getenv(EnvQueries))
		queries.Store(b)
		on.Store(true)
	}
	users++
	var once sync.Once
	return func(ctx context.Context) (err error) {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if users--; users > 0 {
				err = provider.ForceFlush(ctx)
				return
			}
			on.Store(false)
			err = provider.Shutdown(ctx)
			provider = nil
		})
		return err
	}, nil
}

// newProvider is the tracer provider the environment configures (Setup).
func newProvider(ctx context.Context, service string) (*sdktrace.TracerProvider, error) {
	proto := cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("trace: OTEL_EXPORTER_OTLP_PROTOCOL %q: the fleet exports grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("trace: the OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)), // OTEL_SERVICE_NAME, read next, wins
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace: the resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Start starts a span named name of kind, child of ctx's span. Off, it returns ctx
// and a no-op span.
func Start(ctx context.Context, name string, kind oteltrace.SpanKind, attrs ...attribute.KeyValue) (context.Context, oteltrace.Span) {
	if !on.Load() {
		return ctx, noopSpan
	}
	return tracer().Start(ctx, name, oteltrace.WithSpanKind(kind), oteltrace.WithAttributes(attrs...))
}

// Internal is Start of an internal span.
func Internal(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, oteltrace.Span) {
	return Start(ctx, name, oteltrace.SpanKindInternal, attrs...)
}

// End ends span, marking it failed with err (nil: not).
func End(span oteltrace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// ID is the trace id of ctx's span, 32 hex digits; "" when it has none.
func ID(ctx context.Context) string {
	if !on.Load() {
		return ""
	}
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// Link is the address of trace id's page in the trace UI (EnvUI), "" without one.
func Link(id string) string {
	ui := os.Getenv(EnvUI)
	if ui == "" || id == "" {
		return ""
	}
	if !strings.Contains(ui, "{trace_id}") {
		return strings.TrimRight(ui, "/") + "/" + id
	}
	return strings.ReplaceAll(ui, "{trace_id}", id)
}

// natsCarrier carries trace context in NATS headers, whose names are case
// sensitive: traceparent is written and read as the W3C spells it.
type natsCarrier nats.Header

func (c natsCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c natsCarrier) Set(key, value string) { c[key] = []string{value} }
func (c natsCarrier) Keys() []string        { return slices.Collect(maps.Keys(c)) }

// Inject writes ctx's trace context into h (a message being published).
func Inject(ctx context.Context, h nats.Header) {
	if !on.Load() || h == nil || !oteltrace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	prop.Inject(ctx, natsCarrier(h))
}

// Extract is ctx with the trace context h carries (a consumed message's), as the
// remote parent of the spans started from it.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if !on.Load() || h == nil {
		return ctx
	}
	return prop.Extract(ctx, natsCarrier(h))
}

// Middleware traces each request of next as a server span, child of the client's
// traceparent when it sent one, and returns its trace id in HeaderTraceID. The span
// is named after the route the mux matched ("POST /v1/chat/completions").
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !on.Load() {
			next.ServeHTTP(w, r)
			return
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer().Start(ctx, r.Method, oteltrace.WithSpanKind(oteltrace.SpanKindServer),
			oteltrace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path)))
		defer span.End()
		if sc := span.SpanContext(); sc.HasTraceID() {
			w.Header().Set(HeaderTraceID, sc.TraceID().String())
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			span.SetAttributes(semconv.HTTPRoute(r.Pattern))
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// statusWriter notes the status a handler answered with. It passes Flush on (the
// streaming answers need it) and unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack passes a WebSocket upgrade's hijack on.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.wrote = true
	if w.status == http.StatusOK {
		w.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Observe observes v in o, with ctx's trace id as its exemplar when ctx's span is
// sampled: a slow bucket of a latency histogram then links to a trace.
func Observe(ctx context.Context, o prometheus.Observer, v float64) {
	if on.Load() {
		if sc := oteltrace.SpanContextFromContext(ctx); sc.IsSampled() {
			if eo, ok := o.(prometheus.ExemplarObserver); ok {
				eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
				return
			}
		}
	}
	o.Observe(v)
}

// Span records a span that has already happened, from start to now: the time a
// message waited in its stream, known only once it is delivered.
func Span(ctx context.Context, name string, start time.Time, attrs ...attribute.KeyValue) {
	if !on.Load() {
		return
	}
	_, span := tracer().Start(ctx, name, oteltrace.WithTimestamp(start), oteltrace.WithAttributes(attrs...))
	span.End()
}
