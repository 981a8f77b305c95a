package bus

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/searchfleet/searchfleet/pkg/trace"
)

// The trace context of a message travels in its headers (W3C traceparent and
// tracestate): every publish made with a context that holds a span carries it, and
// a consumed message's context is the parent of its handler's spans, so the
// publishes made while handling it carry it on. A redelivery is one more process
// span under the same parent. With tracing off none of this writes or reads a header.

// traceHeaders are the headers of a message's trace context (propagation.TraceContext).
var traceHeaders = [...]string{"traceparent", "tracestate"}

// startDelivery is the context d's handler runs on: the trace context its message
// carries, with a consumer span for this delivery and, before it, a span for the time
// the message waited in its stream (from its first publish to this delivery).
func (r *runner[T]) startDelivery(ctx context.Context, msg jetstream.Msg, d *Delivery[T]) (context.Context, oteltrace.Span) {
	if !trace.On() {
		return ctx, oteltrace.SpanFromContext(ctx)
	}
	ctx = trace.Extract(ctx, msg.Headers())
	consumer := r.b.localName(r.spec.Config.Durable)
	if !d.Published.IsZero() {
		trace.Span(ctx, "queued "+consumer, d.Published, semconv.MessagingDestinationName(d.Subject), trace.Attempt.Int(d.Attempt))
	}
	ctx, span := trace.Start(ctx, "process "+consumer, oteltrace.SpanKindConsumer,
		semconv.MessagingSystemKey.String("nats"), semconv.MessagingOperationTypeKey.String("process"),
		semconv.MessagingDestinationName(d.Subject), semconv.MessagingConsumerGroupName(consumer),
		semconv.MessagingMessageID(d.ID), trace.Attempt.Int(d.Attempt))
	return ctx, span
}

// endDelivery ends a delivery's span with what became of its message.
func endDelivery(span oteltrace.Span, dec Decision, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(trace.Action.String(dec.Action.String()))
	if dec.Action == Ack {
		err = nil
	}
	trace.End(span, err)
}

// copyTrace copies a message's trace context headers from src to dst (a dead
// letter keeps its message's trace).
func copyTrace(dst, src nats.Header) {
	for _, k := range traceHeaders {
		if v := src.Get(k); v != "" {
			dst.Set(k, v)
		}
	}
}
