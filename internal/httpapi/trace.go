package httpapi

import (
	"context"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/tollgate/internal/gateway"
)

// traced runs a request under its span (when tracing is on): a child of
// the caller's traceparent if it sent one, named by method and route,
// with the request id and the answer's status.
func (s *Server) traced(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tr := s.gw.Tracer()
		if tr == nil {
			return next(c)
		}
		r := c.Request()
		ctx := gateway.TraceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, sp := tr.Start(ctx, r.Method+" "+c.Path(), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", c.Path())))
		defer sp.End()
		c.SetRequest(r.WithContext(ctx))
		err := next(c)
		if err != nil {
			s.handleError(err, c) // the status is known once the error is written
			err = nil
		}
		status := c.Response().Status
		sp.SetAttributes(attribute.Int("http.response.status_code", status), attribute.String("tollgate.request_id", c.Response().Header().Get("X-Tollgate-Request-Id")))
		if status >= 500 {
			sp.SetStatus(codes.Error, "")
		}
		return err
	}
}

// span starts a child of the request's span, if tracing is on.
func (s *Server) span(c echo.Context, name string) (context.Context, func(error)) {
	tr := s.gw.Tracer()
	ctx := c.Request().Context()
	if tr == nil {
		return ctx, func(error) {}
	}
	ctx, sp := tr.Start(ctx, name)
	return ctx, func(err error) {
		if err != nil {
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}
}
