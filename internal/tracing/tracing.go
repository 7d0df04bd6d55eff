// Package tracing sets up OpenTelemetry for the gateway: a tracer provider
// exporting over OTLP/HTTP in batches, sampling by ratio unless the caller
// sent a sampled traceparent. Off (no endpoint), there is no provider and
// the gateway's tracer is nil.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/config"
)

// Setup returns the tracer of c's tracing and the function that flushes
// and stops it; a nil tracer when tracing is off.
func Setup(ctx context.Context, c config.Tracing, version string) (trace.Tracer, func(context.Context) error, error) {
	if c.Endpoint == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(c.Endpoint + "/v1/traces")}
	if len(c.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(c.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", c.ServiceName), attribute.String("service.version", version))),
	)
	return tp.Tracer("github.com/tollgate-dev/tollgate"), tp.Shutdown, nil
}
