package e2e_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

const benchBody = `{"model":"test-model","max_tokens":50,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the plot of Hamlet in three sentences."}]}`

// BenchmarkRequestPath measures one whole request through the gateway
// (auth, parse, estimate, reserve, forward, usage, settle) against an
// in-process simulated upstream, next to a bare httputil.ReverseProxy to the
// same upstream; and on the Redis store, leased and exact (Redis runs in
// its own process: its cost is bench/redis-callgrind.sh's).
func BenchmarkRequestPath(b *testing.B) {
	const limits = `{name: usd-month, kind: budget, unit: usd, amount: "$1000000", period: month}, {name: rpm, kind: rate, unit: requests, amount: 100000000, window: 1m}, {name: tpm, kind: rate, unit: tokens, amount: 100000000000, window: 1m}`
	for _, stream := range []bool{false, true} {
		body := benchBody
		name := "json"
		if stream {
			body = strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
			name = "sse"
		}
		b.Run("bare-proxy/"+name, func(b *testing.B) {
			sim, _ := simulated.New(simulated.Options{ReplyTokens: func(uint64) int64 { return 50 }})
			up := httptest.NewServer(sim)
			defer up.Close()
			target, _ := url.Parse(up.URL)
			proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
			defer proxy.Close()
			run(b, proxy.URL, body, "")
		})
		b.Run("tollgate/"+name, func(b *testing.B) {
			h := start(b, limits, simulated.Options{ReplyTokens: func(uint64) int64 { return 50 }})
			run(b, h.url, body, testKey)
		})
		for _, mode := range []string{"leased", "exact"} {
			b.Run("tollgate-redis-"+mode+"/"+name, func(b *testing.B) {
				extra := ""
				if mode == "exact" {
					extra = "    exact: true\n"
				}
				h := startWith(b, setup{teamLimits: limits, sim: simulated.Options{ReplyTokens: func(uint64) int64 { return 50 }},
					redisAddr: redistest.Start(b).Addr, spoolDir: b.TempDir(), redisExtra: extra})
				run(b, h.url, body, testKey)
			})
		}
	}
}

func run(b *testing.B, base, body, key string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}
