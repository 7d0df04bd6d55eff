package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// scrape reads the first instance's /metrics as Prometheus would.
func (h *harness) scrape() map[string]*dto.MetricFamily {
	h.t.Helper()
	return scrapeURL(h.t, h.url)
}

// scrapeURL reads the /metrics of the gateway at base as Prometheus would.
func scrapeURL(t testing.TB, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no %s with labels %v", name, want)
	return 0
}

func TestMetricsAfterAWorkload(t *testing.T) {
	h := start(t, monthlyTen+`, {name: rpm, kind: rate, unit: requests, amount: 3, window: 1m}`, simulated.Options{})
	for i := range 3 {
		if status, _, body, err := send(http.DefaultClient, h.url, chatBody(i, i == 1)); err != nil || status != 200 {
			t.Fatalf("request %d: %d %v %s", i, status, err, body)
		}
	}
	if status, _, _, _ := send(http.DefaultClient, h.url, chatBody(9, false)); status != 429 {
		t.Fatalf("fourth request: %d, want the rate limit", status)
	}
	h.post("/v1/chat/completions", "tg-wrong", `{}`, nil)
	spent, _ := h.spent(teamMonth)

	fams := h.scrape()
	chat := "/v1/chat/completions"
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tollgate_requests_total", map[string]string{"route": chat, "team": "ml", "model": "test-model", "outcome": "served"}, 3},
		{"tollgate_requests_total", map[string]string{"route": chat, "team": "ml", "model": "test-model", "outcome": "refused"}, 1},
		{"tollgate_refusals_total", map[string]string{"reason": "rate_limited", "scope": "team", "limit": "rpm", "team": "ml"}, 1},
		{"tollgate_refusals_total", map[string]string{"reason": "unauthorized"}, 1},
		{"tollgate_spend_usd_micros_total", map[string]string{"team": "ml", "model": "test-model"}, float64(spent)},
		{"tollgate_tokens_total", map[string]string{"team": "ml", "model": "test-model", "kind": "output"}, float64(h.sim.Stats().Usage["test-model"].CompletionTokens)},
		{"tollgate_tokens_total", map[string]string{"team": "ml", "model": "test-model", "kind": "input"}, float64(h.sim.Stats().Usage["test-model"].PromptTokens)},
		{"tollgate_store_operation_duration_seconds", map[string]string{"op": "reserve"}, 4},
		{"tollgate_store_operation_duration_seconds", map[string]string{"op": "settle"}, 3},
		{"tollgate_estimate_actual_ratio", map[string]string{"model": "test-model"}, 3},
		{"tollgate_input_estimate_ratio", map[string]string{"model": "test-model"}, 3},
		{"tollgate_upstream_time_to_first_byte_seconds", map[string]string{"upstream": "sim"}, 3},
		// The key refused most, by name, with no unbounded labels: at
		// most ten series, whatever the keys.
		{"tollgate_refused_keys_top_total", map[string]string{"key": "acme/k1"}, 1},
		// Three of three requests a minute taken.
		{"tollgate_rate_limit_utilization_ratio", map[string]string{"scope": "team", "team": "ml", "limit": "rpm"}, 1},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if u := value(t, fams, "tollgate_budget_utilization_ratio", map[string]string{"scope": "team", "team": "ml", "budget": "usd-month"}); u <= 0 || u >= 1 {
		t.Errorf("budget utilisation %v", u)
	}
	if spent == 0 {
		t.Fatal("nothing spent")
	}
}

// A shadow limit never refuses; what it would have refused is counted and
// logged, and clients are not told about it.
func TestShadowLimit(t *testing.T) {
	h := start(t, monthlyTen+`, {name: rpm-trial, kind: rate, unit: requests, amount: 1, window: 1m, shadow: true}`, simulated.Options{})
	for i := range 3 {
		status, hdr, body, err := send(http.DefaultClient, h.url, chatBody(i, false))
		if err != nil || status != 200 {
			t.Fatalf("request %d under a shadow limit: %d %v %s", i, status, err, body)
		}
		if strings.Contains(hdr.Get("RateLimit-Policy"), "rpm-trial") {
			t.Fatalf("the shadow limit is advertised: %s", hdr.Get("RateLimit-Policy"))
		}
	}
	if got := value(t, h.scrape(), "tollgate_shadow_refusals_total", map[string]string{"scope": "team", "limit": "rpm-trial", "team": "ml"}); got != 2 {
		t.Fatalf("shadow refusals = %v, want 2 (the second and third request)", got)
	}
}
