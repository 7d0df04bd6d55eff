package bound_test

import (
	"net/http"
	"testing"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// Anthropic's fast mode bills 6× the price, US-only inference 1.1×, and
// both together their product: a model that has the multiples reserves
// and settles at them (Prepared.Price), one that has not refuses them.
func TestModesBillTheirMultiple(t *testing.T) {
	m := model(t, "o200k_base")
	list := budget.Price{Input: 5_000_000, CachedInput: 500_000, CacheWrite: 6_250_000, Output: 25_000_000, WebSearch: 10_000,
		Above: &budget.Tier{Tokens: 200_000, Input: 10_000_000}}
	fast := http.Header{"Anthropic-Beta": {"fast-mode-2026-02-01"}}
	body := func(fields string) string {
		return `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"x"}]` + fields + `}`
	}
	for _, tc := range []struct {
		fields string
		h      http.Header
		param  string
	}{
		{`,"speed":"fast"`, fast, "anthropic-beta"},
		{`,"speed":"fast"`, nil, "speed"},
		{`,"inference_geo":"us"`, nil, "inference_geo"},
		{`,"speed":"ludicrous"`, nil, "speed"},
	} {
		req, err := bound.Parse(bound.Messages, []byte(body(tc.fields)), tc.h)
		if err == nil {
			_, err = req.Prepare(m, native{})
		}
		refusal(t, err, tc.param)
	}

	m.FastMode, m.GeoUS = 6000, 1100
	for _, tc := range []struct {
		fields   string
		h        http.Header
		perMille int64
	}{
		{``, nil, 1000},
		{`,"speed":"standard","inference_geo":"global"`, nil, 1000},
		{`,"speed":"fast"`, fast, 6000},
		{`,"inference_geo":"us"`, nil, 1100},
		{`,"speed":"fast","inference_geo":"us"`, fast, 6600},
	} {
		req, err := bound.Parse(bound.Messages, []byte(body(tc.fields)), tc.h)
		if err != nil {
			t.Fatal(err)
		}
		p, err := req.Prepare(m, native{})
		if err != nil {
			t.Fatalf("%s: %v", tc.fields, err)
		}
		price, err := p.Price(list)
		if err != nil {
			t.Fatal(err)
		}
		scaled := func(v budget.Money) budget.Money { return budget.Money((int64(v)*tc.perMille + 999) / 1000) }
		if price.Input != scaled(list.Input) || price.Output != scaled(list.Output) || price.CacheWrite != scaled(list.CacheWrite) ||
			price.Above.Input != scaled(list.Above.Input) || price.WebSearch != list.WebSearch {
			t.Errorf("%s: priced at %+v, want %d‰ of the token rates (the search fee as listed)", tc.fields, price, tc.perMille)
		}
		if list.Above.Input != 10_000_000 {
			t.Fatal("Price changed the list price's tier")
		}
	}
}
