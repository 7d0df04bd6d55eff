package metrics_test

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/tollgate/internal/metrics"
)

// TestKeptSeriesAreTheVectorsSeries: what the request path adds through
// the kept series is what the vectors export, under the right labels,
// also after a cache has started again past its bound.
func TestKeptSeriesAreTheVectorsSeries(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	for i := range 5000 { // past the bound: the cache starts again
		team := "t" + strconv.Itoa(i%4500)
		m.UsageOf(team, "gpt-4o").SpendMicros.Add(2)
		m.UsageOf(team, "gpt-4o").Output.Add(3)
		m.Request(metrics.RequestLabels{Route: "chat", Team: team, Model: "gpt-4o", Outcome: "served"}).Inc()
	}
	if got := testutil.ToFloat64(m.SpendMicros.WithLabelValues("t7", "gpt-4o")); got != 4 {
		t.Errorf("spend of t7 = %v, want 4 (two requests of 2)", got)
	}
	if got := testutil.ToFloat64(m.Tokens.WithLabelValues("t4499", "gpt-4o", "output")); got != 3 {
		t.Errorf("output tokens of t4499 = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.Tokens.WithLabelValues("t7", "gpt-4o", "input")); got != 0 {
		t.Errorf("input tokens of t7 = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.Requests.WithLabelValues("chat", "t9", "gpt-4o", "served")); got != 2 {
		t.Errorf("requests of t9 = %v, want 2", got)
	}
	m.Budget(metrics.BudgetLabels{Rate: true, Scope: "team", Team: "a", Name: "rpm"}).Set(0.5)
	m.Budget(metrics.BudgetLabels{Scope: "team", Team: "a", Name: "rpm"}).Set(0.25)
	if r, b := testutil.ToFloat64(m.RateUsed.WithLabelValues("team", "a", "rpm")), testutil.ToFloat64(m.BudgetUsed.WithLabelValues("team", "a", "rpm")); r != 0.5 || b != 0.25 {
		t.Errorf("rate %v, budget %v; want 0.5 and 0.25", r, b)
	}
	up := m.UpstreamOf("openai")
	up.QueueWait["full"].Observe(1)
	up.QueueDepth.Set(3)
	if n := testutil.CollectAndCount(m.QueueWait, "tollgate_upstream_queue_wait_seconds"); n != 4 {
		t.Errorf("%d queue wait series, want one per result (4)", n)
	}
	if got := testutil.ToFloat64(m.QueueDepth.WithLabelValues("openai")); got != 3 {
		t.Errorf("queue depth %v, want 3", got)
	}
}
