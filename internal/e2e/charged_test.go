package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Forwarded means charged: once a request has reached an upstream, the
// upstream bills it — whether the client waits, whether the gateway
// waits. These tests stand a gateway (one instance on the embedded store,
// or two sharing Redis) in front of simulated upstreams that bill as
// providers do: a request received is generated and billed though its
// client left before the first byte; a stream goes on until the upstream
// notices; a reasoning model's thinking is billed and never sent. For every
// way the gateway or its client can stop listening, the ledger must equal
// what the upstreams billed — or, where the usage cannot be learned, the
// reservation, which is then at least what they billed.

// chargeRig is the gateway over a primary simulated upstream and, if
// asked, a backup it fails over to (billing double), both serving
// test-model at $1/$2 per 1M tokens (in + 2 × out µ$ at the primary).
type chargeRig struct {
	*storeRig
	primary, backup *simulated.Server
}

// newChargeRig starts the rig on store ("embedded", or "redis": two
// instances sharing one Redis); primaryExtra is more YAML for the primary
// upstream (indented four spaces).
func newChargeRig(t *testing.T, store string, primary simulated.Options, backup *simulated.Options, primaryExtra string) *chargeRig {
	t.Helper()
	r := &chargeRig{}
	serve := func(opts simulated.Options) (*simulated.Server, string) {
		opts.APIKey = "k"
		sim, err := simulated.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		t.Cleanup(srv.Close)
		return sim, srv.URL
	}
	var primaryURL, backupURL string
	r.primary, primaryURL = serve(primary)
	src := "upstreams:\n  - {name: primary, base_url: \"" + primaryURL + "/v1\", api_key: k, models: [test-model]}\n"
	if primaryExtra != "" || backup != nil {
		src = "upstreams:\n  - name: primary\n    base_url: " + primaryURL + "/v1\n    api_key: k\n    models: [test-model]\n" + primaryExtra
	}
	if backup != nil {
		r.backup, backupURL = serve(*backup)
		src += "    fallbacks: [backup]\n  - name: backup\n    base_url: " + backupURL + "/v1\n    api_key: k\n    models: [test-model]\n" +
			"    prices: {test-model: {input: \"$2\", output: \"$4\"}}\n"
	}
	src += `models:
  test-model: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 1000, default_output_tokens: 100}
orgs:
  - id: acme
    teams:
      - id: ml
        limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}]
        keys: [{id: k1, hash: "` + policy.HashKey(testKey) + `"}]
`
	r.storeRig = serveOn(t, store, src)
	return r
}

// billed is what the upstreams billed, in µ$.
func (r *chargeRig) billed() int64 {
	n := int64(0)
	for i, sim := range []*simulated.Server{r.primary, r.backup} {
		if sim == nil {
			continue
		}
		u := sim.Stats().Usage["test-model"]
		n += (u.BilledPromptTokens + 2*u.BilledCompletionTokens) * int64(i+1) // the backup bills double
	}
	return n
}

// recorded is what entries charged, in µ$.
func recorded(entries []budget.Entry) int64 {
	n := int64(0)
	for _, e := range entries {
		n += int64(e.Cost)
	}
	return n
}

// post sends body to instance i's chat route under ctx.
func (r *chargeRig) post(ctx context.Context, i int, body string) (*http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.urls[i%len(r.urls)]+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+testKey)
	return http.DefaultClient.Do(req)
}

func chargeBody(i int, stream bool, extra string) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return fmt.Sprintf(`{"model":"test-model",%s"max_tokens":200,%s"messages":[{"role":"user","content":"tell me story %d"}]}`, s, extra, i)
}

// A client that gives up on a non-streaming request while the upstream
// works: the upstream finishes and bills it, so the gateway reads the
// answer to its usage and charges that ("drained") — however many times
// a client does it.
func TestAClientThatLeavesIsCharged(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			r := newChargeRig(t, store, simulated.Options{Latency: 300 * time.Millisecond}, nil, "")
			const n = 4
			for i := range n {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				if resp, err := r.post(ctx, i, chargeBody(i, false, "")); err == nil {
					resp.Body.Close()
					t.Fatalf("request %d answered %d before its client left", i, resp.StatusCode)
				}
				cancel()
			}
			entries := r.settled(t, n)
			for _, e := range entries {
				if e.Settlement != "drained" || e.Usage.Estimated || e.Abandoned != "" {
					t.Fatalf("entry %+v: want the usage read after the client left", e)
				}
			}
			if got, billed := recorded(entries), r.billed(); got != billed || billed == 0 {
				t.Fatalf("recorded %d µ$, the upstream billed %d", got, billed)
			}
		})
	}
}

// A stream its client cuts short: the upstream goes on generating (and a
// reasoning model thinks, unseen, before it writes), so the gateway reads
// the rest of the stream, unrelayed, to its usage.
func TestAStreamItsClientCutsIsCharged(t *testing.T) {
	for _, store := range chargeStores {
		for _, reasoning := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reasoning=%v", store, reasoning), func(t *testing.T) {
				r := newChargeRig(t, store, simulated.Options{ChunkDelay: 20 * time.Millisecond, ReplyTokens: func(uint64) int64 { return 60 }}, nil, "")
				extra := ""
				if reasoning {
					extra = `"reasoning_effort":"low",`
				}
				const n = 2
				for i := range n {
					resp, err := r.post(context.Background(), i, chargeBody(i, true, extra))
					if err != nil || resp.StatusCode != 200 {
						t.Fatalf("request %d: %v %v", i, err, resp)
					}
					if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
						t.Fatal(err)
					}
					resp.Body.Close() // mid-stream
				}
				entries := r.settled(t, n)
				for _, e := range entries {
					if e.Settlement != "drained" || e.Usage.Estimated || (reasoning && e.Usage.ReasoningTokens == 0) {
						t.Fatalf("entry %+v: want the stream's usage, read after the client left", e)
					}
				}
				if got, billed := recorded(entries), r.billed(); got != billed || billed == 0 {
					t.Fatalf("recorded %d µ$, the upstream billed %d", got, billed)
				}
			})
		}
	}
}

// The gateway gives up on an attempt — no headers within the first-byte
// timeout, a stream quiet past the idle timeout, a stream that ends
// without its usage — after the request reached the upstream, which bills
// it: the attempt is charged its reservation, at least what was billed,
// and the ledger says why. With a fallback, the abandoned attempt keeps
// its reservation and the fallback's attempt is charged its own usage.
func TestAnAbandonedAttemptIsChargedItsReservation(t *testing.T) {
	backup := simulated.Options{}
	for _, tc := range []struct {
		desc      string
		primary   simulated.Options
		extra     string
		backup    *simulated.Options
		stream    string // a request field making the request a stream, if any
		status    int
		abandoned []string // per entry, in settlement order
		settled   []string
	}{
		{"no headers within the first-byte timeout", simulated.Options{Latency: 400 * time.Millisecond}, "    first_byte_timeout: 100ms\n", nil, "",
			504, []string{"first_byte_timeout"}, []string{"reservation"}},
		{"the same, then a fallback", simulated.Options{Latency: 400 * time.Millisecond}, "    first_byte_timeout: 100ms\n", &backup, "",
			200, []string{"first_byte_timeout", ""}, []string{"reservation", "reported"}},
		{"a stream quiet past the idle timeout", simulated.Options{Fault: simulated.Stall, ReplyTokens: func(uint64) int64 { return 60 }}, "    idle_timeout: 200ms\n", nil, "stream",
			200, []string{"idle_timeout"}, []string{"reservation"}},
		{"a stream that ends without its usage", simulated.Options{Fault: simulated.DropUsage, ReplyTokens: func(uint64) int64 { return 60 }}, "", nil, "stream",
			200, []string{""}, []string{"reservation"}},
		{"a reasoning model's stream without its usage", simulated.Options{Fault: simulated.DropUsage, ReplyTokens: func(uint64) int64 { return 60 }}, "", nil, "reasoning",
			200, []string{""}, []string{"reservation"}},
	} {
		for _, store := range chargeStores {
			t.Run(store+"/"+tc.desc, func(t *testing.T) {
				r := newChargeRig(t, store, tc.primary, tc.backup, tc.extra)
				extra := ""
				if tc.stream == "reasoning" {
					extra = `"reasoning_effort":"low",`
				}
				resp, err := r.post(context.Background(), 0, chargeBody(0, tc.stream != "", extra))
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
				resp.Body.Close()
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b.String())
				}
				entries := r.settled(t, len(tc.settled))
				// A first-byte timeout's upstream bills the answer it goes
				// on generating: wait for that bill before comparing.
				billed := r.billed()
				testkit.WaitFor(5*time.Second, func() bool { billed = r.billed(); return billed > 0 })
				got := int64(0)
				for i, e := range entries {
					if e.Abandoned != tc.abandoned[i] || e.Settlement != tc.settled[i] {
						t.Fatalf("entry %d: abandoned %q, settled %q; want %q, %q (%+v)", i, e.Abandoned, e.Settlement, tc.abandoned[i], tc.settled[i], e)
					}
					if e.Settlement == "reservation" && (e.Cost != e.Reserved || !e.Usage.Estimated) {
						t.Fatalf("entry %d charged %v of its %v reservation", i, e.Cost, e.Reserved)
					}
					got += int64(e.Cost)
				}
				if billed == 0 || got < billed {
					t.Fatalf("recorded %d µ$, less than the %d the upstreams billed", got, billed)
				}
				if tc.backup != nil {
					u := r.backup.Stats().Usage["test-model"]
					if int64(entries[1].Cost) != 2*(u.BilledPromptTokens+2*u.BilledCompletionTokens) {
						t.Fatalf("the fallback's attempt charged %v; it billed %+v", entries[1].Cost, u)
					}
				}
			})
		}
	}
}

// An upstream that ignores max_tokens bills past the bound: the answer is
// charged what it used (the ledger equals the bill), and the overrun is
// counted on the instance that settled it, by team and model.
func TestAnLLMOverrunIsChargedAndCounted(t *testing.T) {
	for _, store := range chargeStores {
		t.Run(store, func(t *testing.T) {
			r := newChargeRig(t, store, simulated.Options{Fault: simulated.IgnoreMaxTokens, ReplyTokens: func(uint64) int64 { return 900 }}, nil, "")
			const n = 2
			for i := range n {
				resp, err := r.post(context.Background(), i, chargeBody(i, false, ""))
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("request %d: %v %v", i, resp, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			entries := r.settled(t, n)
			over := int64(0)
			for _, e := range entries {
				if e.Cost <= e.Reserved || e.Settlement != "reported" {
					t.Fatalf("entry %+v: want charged what it used, past its reservation", e)
				}
				over += int64(e.Cost - e.Reserved)
			}
			if got, billed := recorded(entries), r.billed(); got != billed {
				t.Fatalf("recorded %d µ$, the upstream billed %d", got, billed)
			}
			metrics := ""
			for _, u := range r.urls {
				_, b := callAs(t, "", http.MethodGet, u+"/metrics", "")
				metrics += b
			}
			if got := sumMetric(metrics, `tollgate_overruns_total{model="test-model",team="ml"}`); got != n {
				t.Errorf("%d overruns counted, want %d:\n%s", got, n, grepLines(metrics, "overrun"))
			}
			if got := sumMetric(metrics, `tollgate_overrun_usd_micros_total{model="test-model",team="ml"}`); got != over {
				t.Errorf("overrun µ$ %d, want %d", got, over)
			}
		})
	}
}
