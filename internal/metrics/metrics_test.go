package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/internal/topk"
)

// metricName finds the tollgate metric names an expression reads.
var metricName = regexp.MustCompile(`tollgate_[a-z_]+`)

// known returns every series name the gateway can expose, histogram
// suffixes included, plus those the app registers (the Redis store's, the
// ledger file's and the snapshot's).
func known(t *testing.T) map[string]bool {
	t.Helper()
	// Registered by the app (the Redis store's; the e2e tests scrape them).
	out := map[string]bool{"tollgate_spool_depth": true, "tollgate_store_breaker_open": true,
		"tollgate_ledger_backlog": true, "tollgate_ledger_entries_stored_total": true,
		"tollgate_lease_reservations_total": true, "tollgate_lease_calls_total": true,
		"tollgate_lease_call_failures_total": true, "tollgate_lease_slices": true, "tollgate_refused_keys_top_total": true,
		"tollgate_ledger_write_failures_total": true, "tollgate_ledger_backlog_entries": true, "tollgate_snapshot_failures_total": true,
		"tollgate_journal_write_failures_total": true, "tollgate_store_lost_writes_total": true, "tollgate_store_orgs_lost": true}
	// Gathering returns only families with samples; describe them instead.
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		metrics.New(describeOnly{ch})
		close(ch)
	}()
	descName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range ch {
		name := descName.FindStringSubmatch(d.String())[1]
		for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
			out[name+suffix] = true
		}
	}
	return out
}

// describeOnly is a Registerer that reports each collector's descriptions.
type describeOnly struct{ ch chan<- *prometheus.Desc }

func (d describeOnly) Register(c prometheus.Collector) error { c.Describe(d.ch); return nil }
func (d describeOnly) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		c.Describe(d.ch)
	}
}
func (d describeOnly) Unregister(prometheus.Collector) bool { return true }

// The shipped alert rules and dashboard read only series the gateway exports.
func TestRulesAndDashboardUseRealMetrics(t *testing.T) {
	names := known(t)
	for _, f := range []string{"../../deploy/prometheus/alerts.yml", "../../deploy/grafana/tollgate.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := metricName.FindAllString(string(data), -1)
		if len(found) == 0 {
			t.Fatalf("%s reads no tollgate metric", f)
		}
		for _, n := range found {
			if !names[n] {
				t.Errorf("%s reads %s, which the gateway does not export", f, n)
			}
		}
	}
	var dash map[string]any
	data, _ := os.ReadFile("../../deploy/grafana/tollgate.json")
	if err := json.Unmarshal(data, &dash); err != nil || len(dash["panels"].([]any)) == 0 {
		t.Fatalf("dashboard is not valid JSON with panels: %v", err)
	}
}

// The refused-keys series are the sketch's top ten at each scrape: never
// more, whatever the number of keys, and none left behind by a key that
// fell out of the top.
func TestTopRefusedKeysAreBounded(t *testing.T) {
	s := topk.New(100)
	for i := range 500 {
		s.Add("acme/k" + strconv.Itoa(i%50))
	}
	for range 40 {
		s.Add("acme/heavy")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewTopRefusedKeys(s.Top))
	fams, err := reg.Gather()
	if err != nil || len(fams) != 1 {
		t.Fatalf("%v %v", fams, err)
	}
	ms := fams[0].GetMetric()
	if fams[0].GetName() != "tollgate_refused_keys_top_total" || len(ms) != metrics.TopRefusedKeysShown {
		t.Fatalf("%s: %d series", fams[0].GetName(), len(ms))
	}
	found := false
	for _, m := range ms {
		if m.GetLabel()[0].GetValue() == "acme/heavy" && m.GetCounter().GetValue() == 40 {
			found = true
		}
	}
	if !found {
		t.Fatalf("the heaviest key is missing: %v", ms)
	}
}
