package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/httpx"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/breaker"
	"github.com/tollgate-dev/tollgate/upstream/convert"
)

// maxResponseBytes bounds a non-streaming response the gateway buffers to
// read its usage; past it the rest is streamed through and the request is
// charged at its reservation.
const maxResponseBytes = 32 << 20

// forwarded request headers (canonical, as returnHeaders); everything else
// the client sent (its key, cookies, internal headers, beta switches)
// stays at the gateway, but what the upstream lets pass
// (upstreams[].pass_headers) and the Anthropic betas the bound checked.
var forwardHeaders = []string{"Accept", "User-Agent"}

// returned response headers (canonical: they are looked up and set as
// they are); the upstream's own rate-limit headers and
// organisation would describe Tollgate's account, not the client's limits.
// The upstream's Date goes on as a proxy's does: net/http formats one
// only for a response without it, and that formatting was a per-request
// cost the bare proxy does not pay.
var returnHeaders = []string{"Content-Type", "Cache-Control", "Date", "X-Request-Id", "Openai-Processing-Ms", "Openai-Version", "Request-Id"}

// returned reports whether k is one of returnHeaders.
func returned(k string) bool {
	switch k {
	case "Content-Type", "Cache-Control", "Date", "X-Request-Id", "Openai-Processing-Ms", "Openai-Version", "Request-Id":
		return true
	}
	return false
}

// attempt is one deployment's answer, its headers read, nothing of it
// relayed yet: a response, or the error that stood for one.
type attempt struct {
	t    *target
	resp *http.Response
	x    *exchange // the exchange's context
	err  error     // ErrUpstream or ErrUpstreamTimeout, with no response
	// forwarded says that, with no response, the request may have reached
	// the upstream all the same — it was not refused before a byte left
	// (unsent) —, which then bills it whether or not it answers.
	forwarded bool
	sent      time.Time
}

// send sends p's request to its deployment and reads the answer's
// headers. It writes nothing to the client.
func (g *Gateway) send(rctx context.Context, cl *Call, p *plan) *attempt {
	t := p.dep.target
	ctx := g.watch.start(rctx, t.timeout, t.firstByte)
	a := &cl.attempt0
	if a.t != nil { // a retry: the first attempt's room is taken
		a = new(attempt)
	}
	*a = attempt{t: t, x: ctx, sent: g.now()}
	ep := p.req.Endpoint
	if tr := p.prep.Translation; tr != nil {
		ep = upstream.EndpointOf(tr.Upstream)
	}
	req, err := t.urls.request(ctx, t.provider, urlKey{ep, p.dep.model.Name, cl.llm.Stream}, p.prep.Body)
	if err != nil {
		a.err = err
		return a
	}
	hs := httpx.NewHeaders(req.Header, len(forwardHeaders)+1)
	for _, k := range forwardHeaders {
		if v := cl.req.Header[k]; len(v) > 0 && v[0] != "" {
			hs.Set(k, v[0])
		}
	}
	hs.Set("Content-Type", "application/json")
	if pass := p.dep.model.Pass; pass != nil {
		for _, k := range pass.Headers {
			if v := cl.req.Header[k]; len(v) > 0 {
				req.Header[k] = v
			}
		}
	}
	g.inject(ctx, req.Header)
	t.provider.Header(req.Header, cl.req.Header)
	if p.prep.Betas != "" {
		hs.Set("Anthropic-Beta", p.prep.Betas)
	}
	if s, ok := t.provider.(upstream.Signer); ok {
		if err := s.Sign(ctx, req, p.prep.Body); err != nil {
			g.log.Error("signing the upstream request", "request_id", cl.id, "upstream", t.name, "err", err)
			a.err = ErrUpstream
			return a
		}
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		t.series.Latency.Observe(g.now().Sub(a.sent).Seconds())
		a.forwarded = !unsent(err)
		var ne net.Error
		switch {
		case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
			a.err = ErrUpstreamTimeout
		default:
			g.log.Warn("upstream unreachable", "request_id", cl.id, "upstream", t.name, "err", err)
			a.err = ErrUpstream
		}
		return a
	}
	ctx.answer()
	t.series.TTFB.Observe(g.now().Sub(a.sent).Seconds())
	a.resp = resp
	return a
}

// unsent says that a round trip's error came before any byte of the
// request left: no connection (a dial or name lookup that failed, a
// certificate refused). Any other error may have come after the upstream
// had the request.
func unsent(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &dns) || errors.As(err, &cert)
}

// retryable reports whether another deployment may serve the request in
// a's place: the upstream failed (no connection, no answer in time, a
// 5xx), is out of quota (429), refused the gateway's credentials, or
// has no such route or model (404: the deployment is misconfigured).
func (a *attempt) retryable() bool {
	if a.resp == nil {
		return errors.Is(a.err, ErrUpstream) || errors.Is(a.err, ErrUpstreamTimeout)
	}
	return deploymentFailed(a.resp.StatusCode) || a.resp.StatusCode == http.StatusNotFound
}

// deploymentFailed says whether an upstream's status is its deployment's
// failure rather than an answer to the request: 429, a 5xx, or 401 and
// 403 — the upstream refused the gateway's own credentials, which no
// client can mend.
func deploymentFailed(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500 || credentialsRefused(status)
}

func credentialsRefused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// failure is an answer not relayed, kept to be if nothing better comes.
type failure struct {
	status int
	header http.Header
	body   []byte
	err    error // no answer: the error to answer with
}

func (f *failure) Error() string {
	if f.err != nil {
		return f.err.Error()
	}
	return "status " + strconv.Itoa(f.status)
}

// fail ends a, backing its upstream off for a Retry-After, and keeps what
// the client would have been told: the answer, in the client's wire.
func (a *attempt) fail(p *plan) *failure {
	defer a.x.release()
	if a.resp == nil {
		return &failure{err: a.err}
	}
	defer a.resp.Body.Close()
	f := &failure{status: a.resp.StatusCode, header: http.Header{}}
	if ra := parseRetryAfter(a.resp.Header); ra > 0 {
		a.t.breaker.Backoff(ra)
		WriteRetryAfter(f.header, ra)
	}
	for _, k := range returnHeaders {
		if v := a.resp.Header.Get(k); v != "" {
			f.header.Set(k, v)
		}
	}
	f.header.Set("X-Tollgate-Upstream", a.t.name)
	f.body, _ = io.ReadAll(io.LimitReader(a.resp.Body, 1<<20))
	client, wire := p.wires()
	switch {
	case credentialsRefused(f.status):
		// Passed through, a 401 would tell the client its own key is
		// wrong; it is the gateway's, at this upstream.
		g := "upstream " + a.t.name + " refused the gateway's credentials (HTTP " + strconv.Itoa(f.status) + ": " +
			convert.ReadError(wire, a.resp.Header, f.body) + "); the gateway's operator must fix them"
		f.header.Set("X-Tollgate-Upstream-Status", strconv.Itoa(f.status))
		f.status = http.StatusBadGateway
		f.body = convert.WriteErrorCode(client, f.status, "upstream_credentials_refused", g)
		f.header.Set("Content-Type", "application/json")
	case f.status == http.StatusNotFound:
		// Passed through, a 404 reads as "no such model" to the client;
		// it is the gateway's deployment — its base_url (a version
		// segment left out) or a model the upstream does not serve.
		g := "upstream " + a.t.name + " answered 404 Not Found at " + sentURL(a.resp) + " (" +
			convert.ReadError(wire, a.resp.Header, f.body) + "): the gateway's operator must fix its base_url or its models list"
		f.header.Set("X-Tollgate-Upstream-Status", strconv.Itoa(f.status))
		f.status = http.StatusBadGateway
		f.body = convert.WriteErrorCode(client, f.status, "upstream_not_found", g)
		f.header.Set("Content-Type", "application/json")
	case client != wire:
		f.body = convert.WriteError(client, f.status, convert.ReadError(wire, a.resp.Header, f.body))
		f.header.Set("Content-Type", "application/json")
	default:
		if ct := a.resp.Header.Get("Content-Type"); ct != "" {
			f.header.Set("Content-Type", ct)
		}
	}
	return f
}

// sentURL is where resp's request went, without its query (which may
// hold a key: Gemini's ?key=).
func sentURL(resp *http.Response) string {
	if resp.Request == nil || resp.Request.URL == nil {
		return "the upstream"
	}
	u := *resp.Request.URL
	u.RawQuery, u.User = "", nil
	return u.String()
}

// wires are the client's wire and the upstream's for p.
func (p *plan) wires() (client, wire convert.Wire) {
	if tr := p.prep.Translation; tr != nil {
		return tr.Client, tr.Upstream
	}
	if p.req.Endpoint == bound.Messages {
		return convert.Anthropic, convert.Anthropic
	}
	return convert.OpenAI, convert.OpenAI
}

// relay writes f to the client, or returns its error when there was no
// answer.
func (f *failure) relay(w http.ResponseWriter) error {
	if f.err != nil {
		return f.err
	}
	for k, v := range f.header {
		w.Header()[k] = v
	}
	w.WriteHeader(f.status)
	_, _ = w.Write(f.body)
	return nil
}

// relay writes a's answer to the client as it arrives and reads its usage.
// failure is what the deployment's breaker is told: nil for an answer
// (4xx included), breaker.ErrFailed for connection errors, timeouts, 5xx,
// 429 and a stream that stalls.
//
// Forwarded means charged: an attempt with no answer that may have
// reached the upstream is charged its reservation; an answer is read to
// its usage though the client left (drained), and one whose usage cannot
// be learned is charged its reservation.
func (g *Gateway) relay(rctx context.Context, cl *Call, p *plan, a *attempt, w http.ResponseWriter) (u budget.Usage, served bool, fail, err error) {
	t := p.dep.target
	defer a.x.release()
	defer func() {
		t.series.Latency.Observe(g.now().Sub(a.sent).Seconds())
		cl.drained = served && rctx.Err() != nil
	}()
	if a.resp == nil {
		if a.forwarded {
			cl.abandon(a)
			return cl.reservedUsage(p), false, breaker.ErrFailed, a.err
		}
		return u, false, breaker.ErrFailed, a.err
	}
	resp := a.resp
	defer resp.Body.Close()
	hs := httpx.NewHeaders(w.Header(), len(returnHeaders)+3)
	// The answer's few headers are walked, rather than the map searched
	// for each of the seven that are returned.
	for k, v := range resp.Header {
		if returned(k) && len(v) > 0 && v[0] != "" {
			hs.Set(k, v[0])
		}
	}
	hs.Set("X-Tollgate-Upstream", t.name)
	hs.Set("X-Tollgate-Deployment", p.dep.name())
	if p.prep.Translation != nil {
		w.Header().Del("Content-Type")
		return g.relayTranslated(rctx, cl, p, a, w)
	}
	if resp.StatusCode != http.StatusOK {
		return u, false, failedWith(resp.StatusCode), a.fail(p).relay(w)
	}
	if cl.llm.Stream && isEventStream(resp.Header.Get("Content-Type")) {
		u := g.stream(rctx, cl, p, w, a.x.stream(resp.Body, t.idle), a.x)
		return u, true, streamFailure(a.x), nil
	}
	return g.copyJSON(cl, p, w, &hs, resp, a.x), true, streamFailure(a.x), nil
}

// streamFailure is what a deployment's breaker is told of a stream that
// ended: a failure when the upstream stalled past its idle timeout or ran
// past the exchange's.
func streamFailure(x *exchange) error {
	if why := x.why(); why == causeIdle || why == causeTimeout {
		return breaker.ErrFailed
	}
	return nil
}

// abandon notes that the gateway stopped listening to a's exchange before
// its answer's end, and why: the attempt is then charged its reservation.
func (cl *Call) abandon(a *attempt) { cl.abandoned = cmp.Or(a.x.why(), causeConnection) }

// causeConnection: an attempt's connection failed after its request may
// have reached the upstream.
const causeConnection = "connection"

// failedWith is what a deployment's breaker is told of an answer with
// status: a failure for 429, 5xx, 401 and 403 (providers bill none of
// them, so nothing is charged), else nil.
func failedWith(status int) error {
	if deploymentFailed(status) {
		return breaker.ErrFailed
	}
	return nil
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

// copyJSON relays a non-streaming answer and reads its usage. The answer
// is watched for quiet as a stream is: a body that stalls is cut at the
// idle timeout.
func (g *Gateway) copyJSON(cl *Call, p *plan, w http.ResponseWriter, hs *httpx.Headers, resp *http.Response, x *exchange) budget.Usage {
	body := x.stream(resp.Body, p.dep.target.idle)
	answer, err := httpx.ReadAll(body, resp.ContentLength, maxResponseBytes)
	if err == nil && len(answer) <= maxResponseBytes {
		hs.Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(answer)
		flush(w) // the client has its answer before the settlement runs
		u, err := convert.AnswerUsage(upstream.Wire(p.req.Endpoint), answer)
		if err == nil {
			return g.charge(cl, p, u)
		}
		g.log.Warn("upstream reported no usage; charging the reservation", "request_id", cl.id, "err", err)
		return cl.reservedUsage(p)
	}
	// Too large to buffer, or cut short: relay what there is, charge in full.
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(answer)
	if err == nil {
		_, _ = io.Copy(w, body)
	}
	cl.abandoned = x.why()
	g.log.Warn("upstream's answer too large or cut short; charging the reservation", "request_id", cl.id, "cause", x.why(), "err", err)
	return cl.reservedUsage(p)
}

// reservedUsage is the reservation's own upper bound, marked estimated; the
// request is then charged exactly what was reserved.
func (cl *Call) reservedUsage(p *plan) budget.Usage {
	cl.chargeReserved = true
	return p.prep.Reserved()
}

// charge is the usage p is settled at for what its upstream reported:
// figures it left out are charged at the most they could be, and logged.
func (g *Gateway) charge(cl *Call, p *plan, u convert.Usage) budget.Usage {
	if p.prep.PerMille != 0 {
		// Billed at the speed and region the answer ran at: a fast
		// request run at standard speed is charged at standard rates.
		if price, err := p.prep.PriceAsServed(p.dep.price, u); err == nil {
			p.price = price
		}
	}
	b := p.prep.Charge(u, p.price)
	if len(b.Unreported) > 0 {
		g.log.Warn("upstream's usage left figures out; charging them at the request's bound", "request_id", cl.id,
			"upstream", p.dep.target.name, "unreported", b.Unreported)
	}
	return b
}

// stream relays an SSE answer event by event, flushing each at once. It
// keeps the last usage reported; the usage-only chunk the gateway asked for
// is dropped when the client did not ask for it. When the client leaves,
// the rest of the stream is read, not relayed, to its usage: the upstream
// goes on generating, and bills it. A stream that ends without usage (cut
// by a timeout, broken, its usage left out) is charged its reservation:
// what was relayed is not what was generated (a reasoning model's
// thinking never is).
func (g *Gateway) stream(ctx context.Context, cl *Call, p *plan, w http.ResponseWriter, body io.Reader, x *exchange) budget.Usage {
	startStream(w)
	meter := upstream.NewMeter(p.req.Endpoint, maxText(p))
	defer meter.Release() // after the return value is counted from its text
	events := upstream.NewEventReader(body)
	defer events.Release()
	count := outputCount{counter: p.dep.model.Counter.Estimate(), bound: p.prep.MaxOutputTokens}
	lease := g.leaseKeeper(ctx, cl)
	relaying := true // until a write fails: the client left
	for {
		raw, data, err := events.Next()
		if len(raw) > 0 {
			usageOnly, perr := meter.Observe(data)
			if perr != nil {
				g.log.Warn("malformed stream event", "request_id", cl.id, "err", perr)
			}
			if count.over(meter) {
				g.endOverrun(w, cl, p, upstream.OverrunEvent(p.req.Endpoint, overrunMessage(p)), count.counted)
				x.cut()
				cl.abandoned = causeOverrun
				return cl.reservedUsage(p)
			}
			if relaying && (!usageOnly || p.prep.ClientWantsUsage) {
				if _, werr := w.Write(raw); werr != nil {
					relaying = false
					g.log.Info("client left a stream; reading it to its usage", "request_id", cl.id)
				} else if events.Buffered() == 0 {
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
		lease.keep(events.Buffered() == 0)
	}
	if u := meter.Usage(); u.Reported() {
		return g.charge(cl, p, u)
	}
	return g.unreported(cl, p, x)
}

// unreported is the usage of a stream that ended without reporting its
// usage: its reservation, the stream abandoned for why its exchange ended
// (if it did).
func (g *Gateway) unreported(cl *Call, p *plan, x *exchange) budget.Usage {
	cl.abandoned = x.why()
	g.log.Warn("stream ended without its usage; charging the reservation", "request_id", cl.id, "upstream", p.dep.target.name,
		"cause", cmp.Or(cl.abandoned, "unreported"))
	return cl.reservedUsage(p)
}

// causeOverrun: a stream ran past the output bound and the gateway cut it.
const causeOverrun = "overrun"

// maxText is how much of a stream's output text the gateway keeps to
// count: 16 bytes a token bounds any tokenizer's longest token.
func maxText(p *plan) int { return int(min(p.prep.MaxOutputTokens, 1<<22)) * 16 }

// outputCount counts a stream's output as it passes. A token is at least
// a byte, so text is counted only once what was counted plus the bytes
// not counted yet could pass the bound: until then the output has not
// passed it, whatever the text says.
type outputCount struct {
	counter interface{ Count(string) int64 } // the model's tokenizer
	bound   int64
	counted int64 // output tokens counted so far, from bytes of text
	bytes   int
}

// over reports whether the output so far — the meter's text; truncated:
// more passed than the text holds — has passed the bound. While the text
// not counted yet, a byte a token, could not take the count past the
// bound, it is not counted: a stream near its cap is counted every few
// chunks, not at every chunk.
func (o *outputCount) over(m outputText) bool {
	text := m.Text()
	if o.counted+int64(len(text)-o.bytes) <= o.bound {
		return false
	}
	o.counted += o.counter.Count(text[o.bytes:])
	o.bytes = len(text)
	return o.counted > o.bound || m.Truncated()
}

// outputText is a stream's output as outputCount reads it: its text so
// far, and whether more passed than the text holds.
type outputText interface {
	Text() string
	Truncated() bool
}

// leaseKeeper renews a streaming request's reservation every third of its
// lease, while the stream lasts.
type leaseKeeper struct {
	g      *Gateway
	ctx    context.Context
	cl     *Call
	last   time.Time
	events int
}

func (g *Gateway) leaseKeeper(ctx context.Context, cl *Call) *leaseKeeper {
	return &leaseKeeper{g: g, ctx: ctx, cl: cl, last: g.now()}
}

// keep runs after every event; drained says the events the last read of
// the upstream brought are all handled. It reads the clock only then, or
// at every 64th event: the events of one read are handled within
// microseconds, and a stream whose reads never drain is looked after all
// the same.
func (k *leaseKeeper) keep(drained bool) {
	if k.events++; !drained && k.events%64 != 0 {
		return
	}
	if k.g.now().Sub(k.last) <= k.cl.settings.lease/3 {
		return
	}
	k.last = k.g.now()
	if k.cl.reservation == nil {
		return
	}
	if err := k.cl.engine.Extend(context.WithoutCancel(k.ctx), k.cl.reservation); err != nil {
		k.g.log.Warn("extending lease", "request_id", k.cl.id, "err", err)
	}
}

func overrunMessage(p *plan) string {
	return fmt.Sprintf("The upstream passed the %d output tokens reserved for this request; the gateway ended the stream.", p.prep.MaxOutputTokens)
}

// endOverrun ends a stream whose upstream went past the output bound the
// gateway reserved (it ignored the cap): a final error event in the
// client's dialect. The request is settled at its reservation.
func (g *Gateway) endOverrun(w http.ResponseWriter, cl *Call, p *plan, event string, counted int64) {
	g.log.Warn("upstream passed the reserved output bound; stream ended", "request_id", cl.id, "model", cl.model,
		"bound", p.prep.MaxOutputTokens, "counted", counted)
	g.metrics.StreamsCut.WithLabelValues(cl.model).Inc()
	_, _ = io.WriteString(w, event)
	flush(w)
}

// startStream writes a stream's headers.
func startStream(w http.ResponseWriter) {
	hs := httpx.NewHeaders(w.Header(), 3) // one allocation, not three
	hs.Set("Content-Type", "text/event-stream")
	hs.Set("Cache-Control", "no-cache")
	hs.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush(w)
}

// flush sends what w holds to the client now, where w can.
func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
