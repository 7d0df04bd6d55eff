package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/internal/topk"
)

// TopRefusedKeysShown is how many keys tollgate_refused_keys_top_total
// has at most: the labels stay bounded however many keys there are.
const TopRefusedKeysShown = 10

var topKeysDesc = prometheus.NewDesc("tollgate_refused_keys_top_total",
	"Limit refusals of the keys this instance refused most since it started (org/key; at most ten series, from a Space-Saving sketch: a count may be over by its overcount_at_most in the admin API).",
	[]string{"key"}, nil)

// topKeys exports the current top of a sketch at each scrape: no series is
// kept for a key that has left the top.
type topKeys func(n int) []topk.Entry

// NewTopRefusedKeys is the collector of the keys top returns.
func NewTopRefusedKeys(top func(n int) []topk.Entry) prometheus.Collector { return topKeys(top) }

func (t topKeys) Describe(ch chan<- *prometheus.Desc) { ch <- topKeysDesc }

func (t topKeys) Collect(ch chan<- prometheus.Metric) {
	for _, e := range t(TopRefusedKeysShown) {
		ch <- prometheus.MustNewConstMetric(topKeysDesc, prometheus.CounterValue, float64(e.Count), e.Key)
	}
}
