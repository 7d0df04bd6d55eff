package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// route is a public model name — a model an upstream serves, or an alias
// — and the deployments that may serve it.
type route struct {
	name string
	// strategy orders the deployments for one request: "ordered" (a
	// model's upstream, then its fallbacks), "weighted" or "least_busy".
	strategy    string
	deployments []*deployment
}

// deployment is one way to serve a route: an upstream, the model as it is
// called and counted there, and its price there.
type deployment struct {
	target *target
	model  bound.Model
	price  budget.Price
	weight int
	label  string // "upstream/model"
}

// name is how the deployment is named to clients and in metrics:
// "upstream/model".
func (d *deployment) name() string { return d.label }

// plan is one deployment with the request prepared for it: the body it is
// sent and the bound of what it may bill.
type plan struct {
	dep  *deployment
	req  *bound.Request
	prep *bound.Prepared
	// price is what the request bills at there: the deployment's list
	// price times its mode's multiple (bound.Prepared.Price).
	price budget.Price
}

// order is the deployments in the order one request tries them; intn
// draws a number in [0, n).
func (r *route) order(intn func(n int) int) []*deployment {
	ds := slices.Clone(r.deployments)
	switch r.strategy {
	case "least_busy":
		// Fewest requests in flight at the upstream first; equals at random.
		for i := len(ds) - 1; i > 0; i-- {
			j := intn(i + 1)
			ds[i], ds[j] = ds[j], ds[i]
		}
		slices.SortStableFunc(ds, func(a, b *deployment) int {
			return int(a.target.inflight.Load() - b.target.inflight.Load())
		})
	case "weighted":
		weighted(ds, intn)
	}
	return ds
}

// weighted orders ds by weighted draws without replacement: the first
// is deployment i with probability weight_i / Σ weights, the next drawn
// from the rest alike; weight-0 deployments come last, in their order.
func weighted(ds []*deployment, intn func(n int) int) {
	for i := range ds {
		total := 0
		for _, d := range ds[i:] {
			total += d.weight
		}
		if total == 0 {
			return
		}
		pick := intn(total)
		for j := i; j < len(ds); j++ {
			if pick < ds[j].weight {
				ds[i], ds[j] = ds[j], ds[i]
				break
			}
			pick -= ds[j].weight
		}
	}
}

// routeModels gives every model an upstream serves its route (that
// upstream, then its fallbacks that list the model too, in order), and
// every alias its deployments.
func (g *Gateway) routeModels(c *config.Config, st *Settings) error {
	targets := map[string]*target{}
	byName := map[string]config.Upstream{}
	for _, u := range c.Upstreams {
		t, err := g.target(u)
		if err != nil {
			return err
		}
		targets[u.Name] = t
		byName[u.Name] = u
	}
	passes := map[string]*bound.Pass{}
	for _, u := range c.Upstreams {
		if len(u.PassFields)+len(u.PassHeaders)+len(u.PassBetas) > 0 {
			headers := make([]string, len(u.PassHeaders))
			for i, h := range u.PassHeaders {
				headers[i] = http.CanonicalHeaderKey(h)
			}
			passes[u.Name] = &bound.Pass{Fields: u.PassFields, Headers: headers, Betas: u.PassBetas}
		}
	}
	deploy := func(u config.Upstream, model string, weight int) (*deployment, error) {
		m, err := modelAt(c, u, model, passes[u.Name])
		if err != nil {
			return nil, err
		}
		return &deployment{target: targets[u.Name], model: m, price: c.PriceAt(u, model), weight: weight, label: u.Name + "/" + m.Name}, nil
	}
	for _, u := range c.Upstreams {
		for _, name := range u.Models {
			if _, seen := st.routes[name]; seen {
				continue // served here as another upstream's fallback
			}
			r := &route{name: name, strategy: "ordered"}
			for _, up := range append([]string{u.Name}, u.Fallbacks...) {
				if fu := byName[up]; slices.Contains(fu.Models, name) {
					d, err := deploy(fu, name, 1)
					if err != nil {
						return err
					}
					r.deployments = append(r.deployments, d)
				}
			}
			st.routes[name] = r
			st.routeNames = append(st.routeNames, name)
		}
	}
	names := make([]string, 0, len(c.Aliases))
	for name := range c.Aliases {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		a := c.Aliases[name]
		r := &route{name: name, strategy: a.Strategy}
		for _, d := range a.Deployments {
			dep, err := deploy(byName[d.Upstream], d.Model, d.Share())
			if err != nil {
				return err
			}
			r.deployments = append(r.deployments, dep)
		}
		st.routes[name] = r
		st.routeNames = append(st.routeNames, name)
	}
	return nil
}

// modelAt is how model is called and counted at upstream u.
func modelAt(c *config.Config, u config.Upstream, name string, pass *bound.Pass) (bound.Model, error) {
	m := c.Models[name]
	counter, err := tokenizer.Load(m.Encoding)
	if err != nil {
		return bound.Model{}, fmt.Errorf("gateway: model %s: %w", name, err)
	}
	if m.DigitTokens != nil && *m.DigitTokens {
		counter = counter.SplitDigits()
	}
	if m.CountsBytes() {
		counter = counter.Bytes()
	}
	preset := catalog.Presets[u.Preset]
	var search bound.WebSearch
	if ws := m.WebSearch; ws != nil {
		search = bound.WebSearch{MaxUses: ws.MaxUses, ResultTokens: ws.ResultTokens}
	}
	return bound.Model{WebSearch: search, FastMode: config.PerMille(m.FastMode), GeoUS: config.PerMille(m.InferenceGeoUS), Pass: pass, Name: name, Counter: counter, MaxOutputTokens: m.MaxOutputTokens,
		DefaultOutputTokens: m.DefaultOutputTokens, ImageTokens: m.ImageTokens, ImageTokensLow: m.ImageTokensLow, PDFPageTokens: m.PDFPageTokens, AudioTokensPerSecond: m.AudioTokensPerSecond,
		AudioOutput: m.OutputAudio.Value > 0, Embedding: m.Embedding,
		TokenRatio: m.TokenRatio, CapField: preset.CapField, StreamUsage: preset.StreamUsage}, nil
}

// inflight counts a target's requests in flight, for least_busy.
type inflight = atomic.Int64
