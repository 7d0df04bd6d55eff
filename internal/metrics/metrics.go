// Package metrics holds Tollgate's Prometheus collectors, registered on a
// registry passed in. Labels are bounded by the config: route, team, model,
// upstream, limit names, modes — never key ids, user ids or request data.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's collectors.
type Metrics struct {
	Requests         *prometheus.CounterVec
	Refusals         *prometheus.CounterVec
	SpendMicros      *prometheus.CounterVec
	Tokens           *prometheus.CounterVec
	BudgetUsed       *prometheus.GaugeVec
	RateUsed         *prometheus.GaugeVec
	StoreLatency     *prometheus.HistogramVec
	StoreErrors      *prometheus.CounterVec
	StoreUnavailable *prometheus.CounterVec
	UpstreamLatency  *prometheus.HistogramVec
	UpstreamTTFB     *prometheus.HistogramVec
	EstimateRatio    *prometheus.HistogramVec
	InputRatio       *prometheus.HistogramVec
	UsageEstimated   *prometheus.CounterVec
	ShadowRefusals   *prometheus.CounterVec

	QueueDepth         *prometheus.GaugeVec
	QueueWait          *prometheus.HistogramVec
	BreakerState       *prometheus.GaugeVec
	BreakerTransitions *prometheus.CounterVec
	Fallbacks          *prometheus.CounterVec
	StreamsCut         *prometheus.CounterVec
	AttemptsAbandoned  *prometheus.CounterVec
	// Overruns count settlements charged past their reservation, and the
	// budgets a settlement took past their ceilings.
	Overruns       *prometheus.CounterVec
	OverrunMicros  *prometheus.CounterVec
	BudgetOverruns *prometheus.CounterVec
	Bypasses       *prometheus.CounterVec
	Alerts         *prometheus.CounterVec

	// ReserveLatency and SettleLatency are StoreLatency's two series.
	ReserveLatency, SettleLatency prometheus.Observer

	series series
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_requests_total",
			Help: "Requests by route, team, model and outcome (served, refused, upstream_error, error, client_closed).",
		}, []string{"route", "team", "model", "outcome"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_refusals_total",
			Help: "Requests refused by the gateway, by reason and by the scope and name of the deciding limit.",
		}, []string{"reason", "scope", "limit", "team"}),
		SpendMicros: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_spend_usd_micros_total",
			Help: "Settled spend in micro-dollars, by team and model.",
		}, []string{"team", "model"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tokens_total",
			Help: "Settled tokens by team, model and kind (input, cached_input, output, reasoning).",
		}, []string{"team", "model", "kind"}),
		BudgetUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_budget_utilization_ratio",
			Help: "Share of a budget spent or reserved (0..1+; above 1 when settled spend has passed the ceiling), as of the last request that touched it (admitted, refused or settled), by scope, team and budget name.",
		}, []string{"scope", "team", "budget"}),
		RateUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_rate_limit_utilization_ratio",
			Help: "Share of a rate limit's burst taken (0..1+; above 1 the bucket is in debt), as of the last request that touched it, by scope, team and limit name.",
		}, []string{"scope", "team", "limit"}),
		StoreLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_store_operation_duration_seconds",
			Help:    "Budget store latency by operation (reserve, settle).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
		StoreErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_store_errors_total",
			Help: "Budget store calls that failed, by operation.",
		}, []string{"op"}),
		StoreUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_store_unavailable_decisions_total",
			Help: "Requests decided while the budget store was unavailable, by mode (fail_closed, fail_open, local_fallback) and route.",
		}, []string{"mode", "route"}),
		UpstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_upstream_duration_seconds",
			Help:    "Whole upstream exchanges, stream included, by upstream.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10),
		}, []string{"upstream"}),
		UpstreamTTFB: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_upstream_time_to_first_byte_seconds",
			Help:    "Time from sending a request upstream to its response headers (for streams, the first token follows at once), by upstream.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}, []string{"upstream"}),
		EstimateRatio: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_estimate_actual_ratio",
			Help:    "Actual cost divided by the reserved estimate, by model (1 = exact; near 0 = over-reserving; above 1 = the bound was passed).",
			Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1, 1.1, 1.5, 2},
		}, []string{"model"}),
		InputRatio: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_input_estimate_ratio",
			Help:    "Input tokens the upstream reported divided by the gateway's bound on them, by model served: above 1, the model's token_ratio (or image, PDF or audio figure) is too low.",
			Buckets: []float64{0.25, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1, 1.05, 1.1, 1.25, 1.5},
		}, []string{"model"}),
		UsageEstimated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_usage_estimated_total",
			Help: "Settlements whose usage the gateway counted itself (the upstream reported none), by model.",
		}, []string{"model"}),
		ShadowRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_shadow_refusals_total",
			Help: "Requests a limit in shadow mode would have refused, by scope, limit and team; they were served.",
		}, []string{"scope", "limit", "team"}),
		QueueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_upstream_queue_depth",
			Help: "Requests waiting in an upstream's queue.",
		}, []string{"upstream"}),
		QueueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_upstream_queue_wait_seconds",
			Help:    "Time requests waited in an upstream's queue, by upstream and result (admitted, full, timeout, cancelled).",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"upstream", "result"}),
		BreakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_upstream_breaker_state",
			Help: "An upstream's circuit breaker: 0 closed, 0.5 half-open, 1 open.",
		}, []string{"upstream"}),
		BreakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_upstream_breaker_transitions_total",
			Help: "Circuit breaker state changes, by upstream and new state.",
		}, []string{"upstream", "to"}),
		Fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_upstream_fallbacks_total",
			Help: "Requests served by a fallback because the upstream before it was refused (breaker open, backing off, queue full), by the upstream skipped and the one that served.",
		}, []string{"from", "to"}),
	}
	m.StreamsCut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_streams_cut_total",
		Help: "Streams the gateway ended because the upstream passed the reserved output bound (it ignored max_tokens), by model.",
	}, []string{"model"})
	m.AttemptsAbandoned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_upstream_attempts_abandoned_total",
		Help: "Upstream attempts the gateway stopped reading before their answer's end, after the request may have reached the upstream (which bills it): each is charged its reservation. By upstream and cause: first_byte_timeout, timeout, idle_timeout, connection, overrun, shutdown.",
	}, []string{"upstream", "cause"})
	m.Overruns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_overruns_total",
		Help: "Settlements charged more than they reserved (a paid API reporting more units than the request allowed, an upstream billing past the bound), by team and model or paid route. Each is logged and alerted with its request id.",
	}, []string{"team", "model"})
	m.OverrunMicros = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_overrun_usd_micros_total",
		Help: "What settlements were charged past their reservations, in micro-dollars, by team and model or paid route.",
	}, []string{"team", "model"})
	m.BudgetOverruns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_budget_overruns_total",
		Help: "Settlements that took a budget's settled spend past its ceiling, by scope, team and budget.",
	}, []string{"scope", "team", "budget"})
	m.Bypasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_bypasses_total",
		Help: "Requests that skipped their limits, by who (a signing service's id, or unlimited-key) and team.",
	}, []string{"by", "team"})
	m.Alerts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_budget_alerts_total",
		Help: "Budget threshold alerts this instance sent (each fires once per period across all instances), by scope, team, budget and threshold percent.",
	}, []string{"scope", "team", "budget", "threshold"})
	m.initSeries()
	reg.MustRegister(m.StreamsCut, m.AttemptsAbandoned, m.Overruns, m.OverrunMicros, m.BudgetOverruns, m.Bypasses, m.Alerts)
	reg.MustRegister(m.QueueDepth, m.QueueWait, m.BreakerState, m.BreakerTransitions, m.Fallbacks)
	reg.MustRegister(m.Requests, m.Refusals, m.SpendMicros, m.Tokens, m.BudgetUsed, m.RateUsed, m.StoreLatency, m.StoreErrors,
		m.StoreUnavailable, m.UpstreamLatency, m.UpstreamTTFB, m.EstimateRatio, m.InputRatio, m.UsageEstimated, m.ShadowRefusals)
	return m
}

// Since observes the seconds since start on h.
func Since(h prometheus.Observer, start time.Time) { h.Observe(time.Since(start).Seconds()) }
