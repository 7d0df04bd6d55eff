package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// A served answer is relayed as it came and settled at the usage the
// upstream reported, at its price; the upstream gets the bounded body
// with its own key, never the client's.
func TestServedAnswerIsSettledAtReportedUsage(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	req := f.request(fullKey, "/v1/chat/completions", hello)
	req.Header.Set("Authorization", "Bearer "+fullKey)
	req.Header.Set("User-Agent", "test-client/1")
	o := f.do(context.Background(), bound.Chat, req)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.resp.Code != 200 || o.resp.Body.String() != chatJSON(10, 5) || o.resp.Header().Get("X-Tollgate-Upstream") != "main" {
		t.Fatalf("relayed %d %q (upstream %q)", o.resp.Code, o.resp.Body, o.resp.Header().Get("X-Tollgate-Upstream"))
	}
	if d := o.resp.Header().Get("Date"); d != upstreamDate {
		t.Fatalf("Date %q, not the upstream's: a proxy passes it on", d)
	}
	got := f.up.requests()[0]
	if got.host != "main.test" || got.header.Get("Authorization") != "Bearer main-secret" || got.header.Get("User-Agent") != "test-client/1" {
		t.Fatalf("upstream got host %s, headers %v", got.host, got.header)
	}
	if !strings.Contains(got.body, `"max_completion_tokens":100`) {
		t.Fatalf("forwarded body %s has no default cap", got.body)
	}
	if spent, pending := f.spent(); spent != 10+2*5 || pending != 0 {
		t.Fatalf("spent %d, pending %d; want 20, 0", spent, pending)
	}
	e := f.ledger()
	if len(e) != 1 || e[0].Cost != 20 || e[0].Reserved != 208 || e[0].Outcome != "settled" || e[0].Upstream != "main" || e[0].Usage.Estimated {
		t.Fatalf("ledger %+v", e)
	}
	if o.call.Outcome() != "served" || counter(t, f.metrics.Requests, "/v1/chat/completions", "ml", "m", "served") != 1 {
		t.Fatalf("outcome %q", o.call.Outcome())
	}
}

// A stream is relayed event by event and settled from its usage chunk;
// the usage-only chunk the gateway asked for is not passed on.
func TestStreamIsSettledFromItsUsageChunk(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	f.up.set(func(r *http.Request, body []byte) (*http.Response, error) {
		if !strings.Contains(string(body), `"include_usage":true`) {
			t.Errorf("the stream's usage was not asked for: %s", body)
		}
		return sseAnswer(r, `{"choices":[{"index":0,"delta":{"content":"hi"}}]}`,
			`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17}}`, `[DONE]`), nil
	})
	o := f.chat(fullKey, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if body := o.resp.Body.String(); !strings.Contains(body, `"hi"`) || strings.Contains(body, "usage") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("relayed %q", body)
	}
	// Headers that keep a stream flowing through proxies and caches.
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := o.resp.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if spent, _ := f.spent(); spent != 10+2*7 {
		t.Fatalf("spent %d, want 24", spent)
	}
}

// An upstream that ignores the cap is cut off at the reserved bound, and
// the request is charged its reservation: never more.
func TestStreamPastItsBoundIsCutAtTheReservation(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		events := make([]string, 0, 400)
		for range 400 {
			events = append(events, `{"choices":[{"index":0,"delta":{"content":" word"}}]}`)
		}
		return sseAnswer(r, events...), nil
	})
	o := f.chat(fullKey, `{"model":"m","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hello"}]}`)
	if o.err != nil {
		t.Fatal(o.err)
	}
	if !strings.Contains(o.resp.Body.String(), "output tokens reserved") {
		t.Fatalf("no overrun event in %q", o.resp.Body.String()[max(0, o.resp.Body.Len()-300):])
	}
	if spent, _ := f.spent(); spent != 8+2*20 {
		t.Fatalf("spent %d, want the reservation 48", spent)
	}
	if got := counter(t, f.metrics.StreamsCut, "m"); got != 1 {
		t.Fatalf("streams cut %v", got)
	}
}

// An upstream's failure is relayed and charges nothing; it opens the
// breaker, and then the model's fallback serves, at its own price, or the
// request is refused without reaching anyone.
func TestUpstreamFailuresChargeNothingAndFallBack(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		if r.URL.Host == "main.test" {
			return jsonAnswer(r, 500, `{"error":{"message":"boom"}}`), nil
		}
		return jsonAnswer(r, 200, chatJSON(10, 5)), nil
	})
	o := f.chat(fullKey, hello)
	if o.err != nil || o.resp.Code != 500 || o.call.Outcome() != "upstream_error" {
		t.Fatalf("a 5xx: %v, %d, %q", o.err, o.resp.Code, o.call.Outcome())
	}
	if spent, pending := f.spent(); spent != 0 || pending != 0 {
		t.Fatalf("a failed request charged %d (pending %d)", spent, pending)
	}
	// The breaker is open (one failure opens it here): m has no fallback.
	o = f.chat(fullKey, hello)
	var refused *gateway.UpstreamRefused
	if !errors.As(o.err, &refused) || refused.Code != "upstream_circuit_open" || refused.RetryAfter <= 0 {
		t.Fatalf("with the breaker open: %v", o.err)
	}
	// m2 falls back to backup, charged at backup's price.
	o = f.chat(fullKey, `{"model":"m2","messages":[{"role":"user","content":"hello"}]}`)
	if o.err != nil || o.resp.Header().Get("X-Tollgate-Upstream") != "backup" {
		t.Fatalf("fallback: %v, upstream %q", o.err, o.resp.Header().Get("X-Tollgate-Upstream"))
	}
	if spent, _ := f.spent(); spent != 3*(10+2*5) {
		t.Fatalf("the fallback charged %d, want backup's price 60", spent)
	}
	if got := counter(t, f.metrics.Fallbacks, "main", "backup"); got != 1 {
		t.Fatalf("fallbacks %v", got)
	}
	if n := len(f.up.requests()); n != 2 {
		t.Fatalf("%d requests reached upstreams, want 2 (the open breaker's none)", n)
	}
}

// An upstream that answers 429 with Retry-After is relayed, and backs
// its breaker off: the next request is refused until then, unsent.
func TestAnUpstreamsRetryAfterBacksItOff(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		resp := jsonAnswer(r, 429, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
		resp.Header.Set("Retry-After", "30")
		return resp, nil
	})
	o := f.chat(fullKey, hello)
	if o.err != nil || o.resp.Code != 429 || o.resp.Header().Get("Retry-After") != "30" {
		t.Fatalf("relayed %v %d %v", o.err, o.resp.Code, o.resp.Header())
	}
	o = f.chat(fullKey, hello)
	var refused *gateway.UpstreamRefused
	if !errors.As(o.err, &refused) || (refused.Code != "upstream_backing_off" && refused.Code != "upstream_circuit_open") || refused.RetryAfter < 29*time.Second {
		t.Fatalf("after the 429: %v", o.err)
	}
	if n := len(f.up.requests()); n != 1 {
		t.Fatalf("%d requests reached the upstream, want 1", n)
	}
}

// An attempt that never reached the upstream costs nothing; one that may
// have — its connection timed out waiting for the answer — is charged its
// reservation, the ledger saying it was abandoned and why. (Forwarded
// means charged: the upstream bills what it was sent.)
func TestUnansweredRequests(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		err       error
		want      error
		charged   bool
		abandoned string
	}{
		{"connection refused", errRefusedConn, gateway.ErrUpstream, false, ""},
		{"no answer in time, the request sent", errTimeout, gateway.ErrUpstreamTimeout, true, "connection"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFixture(t, setup{teamLimits: teamBudget})
			f.up.set(func(*http.Request, []byte) (*http.Response, error) { return nil, tc.err })
			o := f.chat(fullKey, hello)
			if !errors.Is(o.err, tc.want) || o.call.Outcome() != "upstream_error" {
				t.Fatalf("error %v, outcome %q; want %v", o.err, o.call.Outcome(), tc.want)
			}
			e := f.ledger()
			if len(e) != 1 || e[0].Served {
				t.Fatalf("ledger %+v", e)
			}
			spent, pending := f.spent()
			if pending != 0 || f.store.Open() != 0 {
				t.Fatalf("pending %d, %d open", pending, f.store.Open())
			}
			if !tc.charged {
				if spent != 0 || e[0].Cost != 0 || e[0].Settlement != "" {
					t.Fatalf("never sent, yet charged %d: %+v", spent, e[0])
				}
				return
			}
			if spent == 0 || spent != int64(e[0].Reserved) || e[0].Cost != e[0].Reserved ||
				e[0].Settlement != "reservation" || e[0].Abandoned != tc.abandoned || !e[0].Usage.Estimated {
				t.Fatalf("sent and unanswered: spent %d, entry %+v; want the reservation, abandoned for %q", spent, e[0], tc.abandoned)
			}
		})
	}
}

// A client that leaves while the upstream works does not end the
// exchange: the upstream bills the answer, so the gateway reads it to its
// usage and charges that, the ledger saying it was drained.
func TestAClientLeavingDoesNotEndTheExchange(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	left := make(chan struct{})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		leave()
		close(left)
		return jsonAnswer(r, 200, chatJSON(10, 5)), nil
	})
	o := f.do(ctx, bound.Chat, f.request(fullKey, "/v1/chat/completions", hello))
	<-left
	if o.err != nil || o.call.Outcome() != "client_closed" {
		t.Fatalf("error %v, outcome %q", o.err, o.call.Outcome())
	}
	e := f.ledger()
	if spent, pending := f.spent(); spent != 20 || pending != 0 || len(e) != 1 || e[0].Cost != 20 || e[0].Settlement != "drained" || e[0].Abandoned != "" {
		t.Fatalf("spent %d pending %d, ledger %+v; want the answer's 10 in + 5 out, drained", spent, pending, e)
	}
}

// A request the upstream's queue does not admit in time is refused
// before it reaches the upstream, and its reservation is given back.
func TestAQueueThatDoesNotAdmitInTimeRefuses(t *testing.T) {
	// max_wait is what the second request waits before it is refused; it
	// is long enough that the first, admitted at once, is not refused too
	// on a machine busy enough to starve the queue's driver for a while.
	f := newFixture(t, setup{teamLimits: teamBudget, queue: "queue: {concurrency: 1, max_wait: 250ms}"})
	f.up.arrived = make(chan string, 4)
	release := make(chan struct{})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		<-release
		return jsonAnswer(r, 200, chatJSON(10, 5)), nil
	})
	first := make(chan outcome, 1)
	go func() { first <- f.chat(fullKey, hello) }()
	select {
	case <-f.up.arrived: // the first holds the one slot until released
	case o := <-first:
		t.Fatalf("the first request ended before it reached the upstream: %v", o.err)
	}
	o := f.chat(fullKey, hello)
	var refused *gateway.UpstreamRefused
	if !errors.As(o.err, &refused) || refused.Code != "upstream_queue_timeout" || o.call.Outcome() != "refused" {
		t.Fatalf("the second: %v (%q)", o.err, o.call.Outcome())
	}
	close(release)
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	if spent, pending := f.spent(); spent != 20 || pending != 0 || len(f.up.requests()) != 1 {
		t.Fatalf("spent %d pending %d, %d upstream requests; want the first only", spent, pending, len(f.up.requests()))
	}
}

// A paid route reserves the units the request allows, forwards the call
// as it is with the route's key, and is charged the units the answer
// reports.
func TestPaidRouteIsChargedItsUnits(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	f.up.set(func(r *http.Request, body []byte) (*http.Response, error) {
		resp := jsonAnswer(r, 200, `{"hits":[]}`)
		resp.Header.Set("X-Units", "7")
		return resp, nil
	})
	req := f.request(fullKey, "/paid/search", `{"q":"tollgate"}`)
	req.Target = "/paid/search/v2/find?lang=en&limit=20"
	cl, err := f.gw.AdmitPaid(context.Background(), "search", req)
	o := f.serve(context.Background(), cl, err)
	if o.err != nil || o.resp.Body.String() != `{"hits":[]}` {
		t.Fatalf("%v %q", o.err, o.resp.Body)
	}
	got := f.up.requests()[0]
	if got.host != "paid.test" || got.path != "/api/v2/find" || got.query != "lang=en&limit=20" || got.header.Get("X-Api-Key") != "paid-secret" || got.body != `{"q":"tollgate"}` {
		t.Fatalf("upstream got %+v", got)
	}
	if spent, _ := f.spent(); spent != 1000+7*100 {
		t.Fatalf("spent %d, want $0.001 + 7 × $0.0001", spent)
	}
	if e := f.ledger(); len(e) != 1 || e[0].Reserved != 1000+20*100 || e[0].Model != "search" || e[0].Units != 7 || e[0].Settlement != "reported" {
		t.Fatalf("ledger %+v", e)
	}
}

// An upstream's redirect is relayed, not followed: following it would
// send the request — and the upstream's key — where the config never
// said, and charge for an answer from there.
func TestAnUpstreamsRedirectIsNotFollowed(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		resp := jsonAnswer(r, http.StatusTemporaryRedirect, `{}`)
		resp.Header.Set("Location", "http://elsewhere.test/v1/chat/completions")
		return resp, nil
	})
	o := f.chat(fullKey, hello)
	if o.err != nil || o.resp.Code != http.StatusTemporaryRedirect {
		t.Fatalf("got %v, %d; want the 307 relayed", o.err, o.resp.Code)
	}
	for _, r := range f.up.requests() {
		if r.host == "elsewhere.test" {
			t.Fatal("the redirect was followed")
		}
	}
	if n := len(f.up.requests()); n != 1 {
		t.Fatalf("%d requests reached upstreams, want 1", n)
	}
	// A paid route's too.
	req := f.request(fullKey, "/paid/search", `{"q":"tollgate"}`)
	req.Target = "/paid/search/v2/find?limit=5"
	cl, err := f.gw.AdmitPaid(context.Background(), "search", req)
	if o := f.serve(context.Background(), cl, err); o.err != nil || o.resp.Code != http.StatusTemporaryRedirect {
		t.Fatalf("paid route: got %v, %d; want the 307 relayed", o.err, o.resp.Code)
	}
	// The paid API answered: the 307 is billed like any answer, at the
	// units the request allowed (it reported none).
	if e := f.ledger(); len(e) != 2 || e[1].Cost != 1000+5*100 || e[1].Settlement != "reservation" {
		t.Fatalf("the paid redirect's ledger entry: %+v", e)
	}
	if n := len(f.up.requests()); n != 2 {
		t.Fatalf("%d requests reached upstreams, want 2 (one per route)", n)
	}
}

// A stream that outlives its reservation's lease keeps the reservation:
// the gateway extends it as events pass, so a sweep finds nothing expired
// and the request settles at the usage reported.
func TestLongStreamKeepsItsReservation(t *testing.T) {
	f := newFixture(t, setup{teamLimits: teamBudget})
	pr, pw := io.Pipe()
	f.up.set(func(r *http.Request, _ []byte) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: r}, nil
	})
	done := make(chan outcome, 1)
	go func() {
		done <- f.chat(fullKey, `{"model":"m","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hello"}]}`)
	}()
	// A write returns once the gateway has read it, so by then it has
	// handled every event before it.
	send := func(data string) {
		t.Helper()
		if _, err := io.WriteString(pw, "data: "+data+"\n\n"); err != nil {
			t.Fatal(err)
		}
	}
	word := `{"choices":[{"index":0,"delta":{"content":" word"}}]}`
	send(word)
	send(word)
	// Past a third of the configured lease (10 minutes), and past the
	// engine's own lease (a minute), which the reservation was made with.
	f.clock.Advance(4 * time.Minute)
	send(word) // extends the reservation from now
	send(word)
	if n, err := f.store.Sweep(context.Background()); err != nil || n != 0 {
		t.Fatalf("a sweep mid-stream: %d expired (%v), want none: the reservation was not extended", n, err)
	}
	send(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}}`)
	send(`[DONE]`)
	pw.Close()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if spent, pending := f.spent(); spent != 10+2*4 || pending != 0 {
		t.Fatalf("spent %d pending %d, want the reported 18 settled", spent, pending)
	}
}
