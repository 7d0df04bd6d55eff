package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A vector finds a series by validating, hashing and comparing its label
// values at every call — some 900 instructions —, and a request touches
// fifteen. The request path asks these instead: the series it updates,
// bound once per label set and kept in a map. No series is ever deleted
// from the vectors, so a kept one never goes stale.

// maxKept bounds each cache; past it the cache starts again (the series
// stay in their vectors: only the look-up is paid again).
const maxKept = 4096

type kept[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]V
	bind func(K) V
}

func (c *kept[K, V]) get(k K) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = c.bind(k)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxKept {
		c.m = make(map[K]V)
	}
	c.m[k] = v
	c.mu.Unlock()
	return v
}

// Usage are the series a served request of one team and model adds to.
type Usage struct {
	SpendMicros                           prometheus.Counter
	Input, CachedInput, Output, Reasoning prometheus.Counter
	EstimateRatio                         prometheus.Observer
	Estimated                             prometheus.Counter
}

type teamModel struct{ team, model string }

// RequestLabels are tollgate_requests_total's labels.
type RequestLabels struct{ Route, Team, Model, Outcome string }

// BudgetLabels name a budget's utilisation series; Rate picks
// tollgate_rate_limit_utilization_ratio over the budget gauge.
type BudgetLabels struct {
	Rate              bool
	Scope, Team, Name string
}

// Upstream are the series of one upstream.
type Upstream struct {
	Latency, TTFB prometheus.Observer
	QueueDepth    prometheus.Gauge
	// QueueWait by result: admitted, full, timeout, cancelled.
	QueueWait map[string]prometheus.Observer
}

// queueResults are QueueWait's results.
var queueResults = []string{"admitted", "full", "timeout", "cancelled"}

type series struct {
	usage      kept[teamModel, *Usage]
	requests   kept[RequestLabels, prometheus.Counter]
	budgets    kept[BudgetLabels, prometheus.Gauge]
	inputRatio kept[string, prometheus.Observer]
}

func (m *Metrics) initSeries() {
	s := &m.series
	s.usage.bind = func(k teamModel) *Usage {
		return &Usage{
			SpendMicros:   m.SpendMicros.WithLabelValues(k.team, k.model),
			Input:         m.Tokens.WithLabelValues(k.team, k.model, "input"),
			CachedInput:   m.Tokens.WithLabelValues(k.team, k.model, "cached_input"),
			Output:        m.Tokens.WithLabelValues(k.team, k.model, "output"),
			Reasoning:     m.Tokens.WithLabelValues(k.team, k.model, "reasoning"),
			EstimateRatio: m.EstimateRatio.WithLabelValues(k.model),
			Estimated:     m.UsageEstimated.WithLabelValues(k.model),
		}
	}
	s.requests.bind = func(k RequestLabels) prometheus.Counter {
		return m.Requests.WithLabelValues(k.Route, k.Team, k.Model, k.Outcome)
	}
	s.budgets.bind = func(k BudgetLabels) prometheus.Gauge {
		if k.Rate {
			return m.RateUsed.WithLabelValues(k.Scope, k.Team, k.Name)
		}
		return m.BudgetUsed.WithLabelValues(k.Scope, k.Team, k.Name)
	}
	s.inputRatio.bind = func(model string) prometheus.Observer { return m.InputRatio.WithLabelValues(model) }
	m.ReserveLatency = m.StoreLatency.WithLabelValues("reserve")
	m.SettleLatency = m.StoreLatency.WithLabelValues("settle")
}

// UsageOf returns the usage series of team and model.
func (m *Metrics) UsageOf(team, model string) *Usage {
	return m.series.usage.get(teamModel{team, model})
}

// Request returns the request counter of l.
func (m *Metrics) Request(l RequestLabels) prometheus.Counter { return m.series.requests.get(l) }

// Budget returns the utilisation gauge of l.
func (m *Metrics) Budget(l BudgetLabels) prometheus.Gauge { return m.series.budgets.get(l) }

// UpstreamOf binds the series of the upstream name; the gateway keeps
// them with the upstream.
func (m *Metrics) UpstreamOf(name string) *Upstream {
	u := &Upstream{
		Latency:    m.UpstreamLatency.WithLabelValues(name),
		TTFB:       m.UpstreamTTFB.WithLabelValues(name),
		QueueDepth: m.QueueDepth.WithLabelValues(name),
		QueueWait:  make(map[string]prometheus.Observer, len(queueResults)),
	}
	for _, r := range queueResults {
		u.QueueWait[r] = m.QueueWait.WithLabelValues(name, r)
	}
	return u
}

// InputRatioOf returns the input ratio histogram of the served model.
func (m *Metrics) InputRatioOf(model string) prometheus.Observer {
	return m.series.inputRatio.get(model)
}
