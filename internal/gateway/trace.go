package gateway

import (
	"context"
	"net/http"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traces (OpenTelemetry, off unless Options.Tracer is set): the adapter
// starts one span per request; the sequence adds a child per step —
// estimate, reserve, queue, upstream, settle — and passes the upstream
// span to the upstream as a W3C traceparent. Off, a step costs one nil
// check.

// noEnd ends no span.
func noEnd(error) {}

// span starts a child of ctx's span named name, if tracing is on; end
// records err (if any) and ends it.
func (g *Gateway) span(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, func(error)) {
	if g.tracer == nil {
		return ctx, noEnd
	}
	// A copy: given attrs itself, the tracer would put every caller's
	// attributes on the heap, tracing on or off.
	ctx, sp := g.tracer.Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
	return ctx, func(err error) {
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}
}

// Tracer is the gateway's tracer; nil when tracing is off.
func (g *Gateway) Tracer() trace.Tracer { return g.tracer }

// TraceContext is how spans cross processes: W3C traceparent.
var TraceContext propagation.TextMapPropagator = propagation.TraceContext{}

// inject writes ctx's span into h as a traceparent, when tracing is on.
func (g *Gateway) inject(ctx context.Context, h http.Header) {
	if g.tracer != nil {
		TraceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
