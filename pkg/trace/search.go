package trace

import (
	"context"
	"fmt"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	oteltrace "go.opentelemetry.io/otel/trace"
)

// Step names the job and hop a chain step (ctx's consumer span) works on.
func Step(ctx context.Context, job string, hop int) {
	if on.Load() {
		oteltrace.SpanFromContext(ctx).SetAttributes(JobID.String(job), Hop.Int(hop))
	}
}

// Tool starts the client span of a server-tool call ("web_search brave",
// "web_fetch"): the GenAI execute_tool operation, the engine, the job and the call;
// the query (or address) only when the operator opted in (Queries).
func Tool(ctx context.Context, tool, engine, query, job, call string) (context.Context, oteltrace.Span) {
	if !on.Load() {
		return ctx, noopSpan
	}
	name := tool
	if engine != "" {
		name += " " + engine
	}
	ctx, span := Start(ctx, name, oteltrace.SpanKindClient, GenAIOperation.String("execute_tool"), GenAIToolName.String(tool),
		GenAIToolCallID.String(call), JobID.String(job), SearchEngine.String(engine))
	if queries.Load() && query != "" {
		span.SetAttributes(SearchQuery.String(query))
	}
	return ctx, span
}

// Searched puts a search's outcome on ctx's span (Tool's): the hits it returned,
// what it cost, and how it was answered (SearchOutcome).
func Searched(ctx context.Context, outcome string, results int, costUSD float64) {
	if !on.Load() {
		return
	}
	span := oteltrace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(SearchOutcome.String(outcome), SearchResults.Int(results), SearchCost.Float64(costUSD))
	}
}

// Attempted ends a webhook attempt's span: the job, the receiver's host and its
// answer (or the error that stood for one).
func Attempted(span oteltrace.Span, job, host string, code int, err error) {
	if span.IsRecording() {
		span.SetAttributes(JobID.String(job), semconv.ServerAddress(host))
		if code > 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(code))
			if code >= 300 && err == nil {
				err = fmt.Errorf("HTTP %d", code)
			}
		}
	}
	End(span, err)
}
