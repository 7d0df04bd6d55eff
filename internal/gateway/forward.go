package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/breaker"
	"github.com/tollgate-dev/tollgate/upstream/queue"
)

// maxResponseBytes bounds a non-streaming response the gateway buffers to
// read its usage; past it the rest is streamed through and the request is
// charged at its reservation.
const maxResponseBytes = 32 << 20

// forwarded request headers; everything else the client sent (its key,
// cookies, internal headers) stays at the gateway.
var forwardHeaders = []string{"Accept", "User-Agent", "OpenAI-Beta"}

// returned response headers; the upstream's own rate-limit headers and
// organisation would describe Tollgate's account, not the client's limits.
var returnHeaders = []string{"Content-Type", "Cache-Control", "X-Request-Id", "Openai-Processing-Ms", "Openai-Version", "Request-Id"}

// Forward is the sequence's second step: it sends an admitted call to its
// upstream and writes the answer to w as it arrives. An LLM call goes to
// the first candidate upstream that takes it — its breaker closed, its
// queue admitting it —; a paid call to its route's API. The error is one
// the client is answered with when nothing was written yet (an
// *UpstreamRefused, ErrUpstream, ErrUpstreamTimeout, ErrClientCanceled);
// what was served is kept for Finish.
func (g *Gateway) Forward(ctx context.Context, cl *Call, w http.ResponseWriter) error {
	var err error
	if cl.paid != nil {
		cl.units, cl.reported, cl.ok, err = g.forwardPaid(ctx, cl, w)
	} else {
		cl.usage, cl.ok, err = g.forward(ctx, cl, w)
	}
	cl.outcome = outcomeOf(cl.ok, err)
	return err
}

// outcomeOf names how the upstream exchange ended, for the metrics.
func outcomeOf(served bool, err error) string {
	var upErr *UpstreamRefused
	switch {
	case served:
		return "served"
	case errors.Is(err, ErrClientCanceled):
		return "client_closed"
	case errors.As(err, &upErr):
		return "refused"
	}
	return "upstream_error"
}

// forward sends the prepared request to the first candidate upstream that
// takes it. served is false when no upstream served the request
// (refusals, error statuses, no answer); usage is then meaningless.
func (g *Gateway) forward(ctx context.Context, cl *Call, w http.ResponseWriter) (u budget.Usage, served bool, err error) {
	refused := &UpstreamRefused{}
	skipped := ""
	for _, cand := range cl.route.candidates {
		t := cand.target
		done, ra, err := t.breaker.Allow()
		if err != nil {
			refused.note(map[bool]string{true: "upstream_backing_off", false: "upstream_circuit_open"}[errors.Is(err, breaker.ErrBackoff)], ra)
			skipped = t.name
			continue
		}
		release := func() {}
		if t.queue != nil {
			start := g.now()
			g.metrics.QueueDepth.WithLabelValues(t.name).Set(float64(t.queue.Len() + 1))
			rel, ra, err := t.queue.Wait(ctx, cl.principal.Team, cl.estimate.Tokens)
			g.metrics.QueueDepth.WithLabelValues(t.name).Set(float64(t.queue.Len()))
			result := "admitted"
			switch {
			case errors.Is(err, queue.ErrFull):
				result = "full"
			case errors.Is(err, queue.ErrDeadline):
				result = "timeout"
			case err != nil:
				result = "cancelled"
			}
			g.metrics.QueueWait.WithLabelValues(t.name, result).Observe(g.now().Sub(start).Seconds())
			if err != nil {
				done(context.Canceled) // not the upstream's doing
				if ctx.Err() != nil {
					return u, false, ErrClientCanceled
				}
				refused.note(map[bool]string{true: "upstream_queue_full", false: "upstream_queue_timeout"}[errors.Is(err, queue.ErrFull)], ra)
				skipped = t.name
				continue
			}
			release = rel
		}
		if skipped != "" {
			g.metrics.Fallbacks.WithLabelValues(skipped, t.name).Inc()
		}
		cl.served = &cand
		u, served, failure, err := g.exchange(ctx, cl, t, w)
		release()
		done(failure)
		return u, served, err
	}
	g.log.Warn("no upstream took the request", "request_id", cl.id, "model", cl.model, "reason", refused.Code)
	return u, false, refused
}

// note keeps the refusal that lets the client retry soonest.
func (e *UpstreamRefused) note(code string, ra time.Duration) {
	if e.Code == "" || ra < e.RetryAfter {
		e.Code, e.RetryAfter = code, ra
	}
}

// exchange sends the request to t and relays the answer. failure is what
// t's breaker is told: nil for an answer (4xx included), breaker.ErrFailed
// for connection errors, timeouts, 5xx and 429, context.Canceled when the
// client left.
func (g *Gateway) exchange(rctx context.Context, cl *Call, t *target, w http.ResponseWriter) (u budget.Usage, served bool, failure, err error) {
	ctx, cancel := context.WithTimeout(rctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.provider.URL(cl.llm.Endpoint, cl.llm.Model), bytes.NewReader(cl.prep.Body))
	if err != nil {
		return u, false, nil, err
	}
	for _, k := range forwardHeaders {
		if v := cl.req.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	t.provider.Header(req.Header, cl.req.Header)
	sent := g.now()
	defer func() { g.metrics.UpstreamLatency.WithLabelValues(t.name).Observe(g.now().Sub(sent).Seconds()) }()
	resp, err := t.client.Do(req)
	if err != nil {
		var ne net.Error
		switch {
		case rctx.Err() != nil:
			return u, false, context.Canceled, ErrClientCanceled
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			return u, false, breaker.ErrFailed, ErrUpstreamTimeout
		}
		g.log.Warn("upstream unreachable", "request_id", cl.id, "upstream", t.name, "err", err)
		return u, false, breaker.ErrFailed, ErrUpstream
	}
	defer resp.Body.Close()
	g.metrics.UpstreamTTFB.WithLabelValues(t.name).Observe(g.now().Sub(sent).Seconds())

	h := w.Header()
	for _, k := range returnHeaders {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("X-Tollgate-Upstream", t.name)
	if resp.StatusCode != http.StatusOK {
		return u, false, relayFailure(w, t, resp), nil
	}
	if cl.llm.Stream && isEventStream(resp.Header.Get("Content-Type")) {
		body := newIdleReader(resp.Body, t.idle, cancel)
		defer body.stop()
		u := g.stream(rctx, cl, w, body, cancel)
		if body.fired() {
			g.log.Warn("upstream stream stalled past its idle timeout", "request_id", cl.id, "upstream", t.name, "idle", t.idle)
			return u, true, breaker.ErrFailed, nil
		}
		return u, true, nil, nil
	}
	return g.copyJSON(cl, w, resp), true, nil, nil
}

// relayFailure passes an upstream's refusal or failure through to the
// client, charging nothing (providers do not bill failed requests), and
// returns what t's breaker is told: a failure for 429 and 5xx, whose
// Retry-After also backs the breaker off.
func relayFailure(w http.ResponseWriter, t *target, resp *http.Response) (failure error) {
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		failure = breaker.ErrFailed
		if ra := parseRetryAfter(resp.Header); ra > 0 {
			t.breaker.Backoff(ra)
			WriteRetryAfter(w.Header(), ra)
		}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return failure
}

// WriteRetryAfter sets Retry-After in whole seconds (rounded up, at least
// 1) and Retry-After-Ms, which the official SDKs read first.
func WriteRetryAfter(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	secs := int64(math.Ceil(d.Seconds()))
	h.Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(d.Milliseconds(), 1), 10))
}

// parseRetryAfter reads Retry-After-Ms or Retry-After (seconds or a date).
func parseRetryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseInt(h.Get("Retry-After-Ms"), 10, 64); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	v := h.Get("Retry-After")
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		return time.Until(at)
	}
	return 0
}

func isEventStream(ct string) bool { return len(ct) >= 17 && ct[:17] == "text/event-stream" }

// copyJSON relays a non-streaming answer and reads its usage.
func (g *Gateway) copyJSON(cl *Call, w http.ResponseWriter, resp *http.Response) budget.Usage {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err == nil && len(body) <= maxResponseBytes {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body)
		flush(w) // the client has its answer before the settlement runs
		if u, ok := cl.llm.Endpoint.UsageFromJSON(body); ok {
			return u
		}
		g.log.Warn("upstream reported no usage; charging the reservation", "request_id", cl.id)
		return cl.reservedUsage()
	}
	// Too large to buffer, or cut short: relay what there is, charge in full.
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	if err == nil {
		_, _ = io.Copy(w, resp.Body)
	}
	return cl.reservedUsage()
}

// reservedUsage is the reservation's own upper bound, marked estimated; the
// request is then charged exactly what was reserved.
func (cl *Call) reservedUsage() budget.Usage {
	cl.chargeReserved = true
	return budget.Usage{InputTokens: cl.prep.InputTokens, OutputTokens: cl.prep.MaxOutputTokens, Estimated: true}
}

// stream relays an SSE answer event by event, flushing each at once. It
// keeps the last usage reported; the usage-only chunk the gateway asked for
// is dropped when the client did not ask for it. A stream that ends without
// usage (cut short, client gone) is charged for its input estimate and the
// output the gateway saw, counted with the model's tokenizer.
func (g *Gateway) stream(ctx context.Context, cl *Call, w http.ResponseWriter, body io.Reader, cancel func()) budget.Usage {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush(w)

	maxText := int(min(cl.prep.MaxOutputTokens, 1<<22)) * 16
	meter := cl.llm.Endpoint.NewMeter(maxText)
	events := upstream.NewEventReader(body)
	bound := cl.prep.MaxOutputTokens
	var counted int64 // output tokens counted so far, from countedBytes of text
	countedBytes := 0
	lastExtend := g.now()
	for {
		raw, data, err := events.Next()
		if len(raw) > 0 {
			usageOnly, perr := meter.Observe(data)
			if perr != nil {
				g.log.Warn("malformed stream event", "request_id", cl.id, "err", perr)
			}
			// Mid-stream metering: a token is at least a byte, so counting
			// starts only once the text could have reached the bound; then
			// each new piece is counted as it passes.
			if text := meter.Text(); len(text) >= int(bound) && len(text) > countedBytes {
				counted += cl.route.model.Counter.Count(text[countedBytes:])
				countedBytes = len(text)
				if counted > bound || meter.Truncated() {
					g.endOverrun(w, cl, counted)
					cancel()
					return cl.reservedUsage()
				}
			}
			if !usageOnly || cl.prep.ClientWantsUsage {
				if _, werr := w.Write(raw); werr != nil {
					break // the client went away; the upstream is cancelled with its context
				}
				if events.Buffered() == 0 {
					flush(w)
				}
			}
		}
		if err != nil {
			flush(w)
			if !errors.Is(err, io.EOF) {
				g.log.Warn("stream ended early", "request_id", cl.id, "err", err)
			}
			break
		}
		if g.now().Sub(lastExtend) > cl.settings.lease/3 {
			lastExtend = g.now()
			if cl.reservation == nil {
				continue
			}
			if err := cl.engine.Extend(context.WithoutCancel(ctx), cl.reservation); err != nil {
				g.log.Warn("extending lease", "request_id", cl.id, "err", err)
			}
		}
	}
	if u, ok := meter.Usage(); ok {
		return u
	}
	out := bound
	if !meter.Truncated() {
		out = min(out, cl.route.model.Counter.Count(meter.Text()))
	}
	return budget.Usage{InputTokens: cl.prep.InputTokens, OutputTokens: out, Estimated: true}
}

// endOverrun ends a stream whose upstream went past the output bound the
// gateway reserved (it ignored max_tokens): a final error event, then
// [DONE]. The request is settled at its reservation.
func (g *Gateway) endOverrun(w http.ResponseWriter, cl *Call, counted int64) {
	g.log.Warn("upstream passed the reserved output bound; stream ended", "request_id", cl.id, "model", cl.model,
		"bound", cl.prep.MaxOutputTokens, "counted", counted)
	g.metrics.StreamsCut.WithLabelValues(cl.model).Inc()
	msg := fmt.Sprintf("The upstream passed the %d output tokens reserved for this request; the gateway ended the stream.", cl.prep.MaxOutputTokens)
	_, _ = io.WriteString(w, cl.llm.Endpoint.OverrunEvent(msg))
	flush(w)
}

// flush sends what w holds to the client now, where w can.
func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
