package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// CatalogProvider is the price catalogue's provider of upstream u: its
// kind, or its preset's provider for an OpenAI-compatible preset.
func (u *Upstream) CatalogProvider() string {
	if u.Kind == "" || u.Kind == "openai" {
		if p, ok := catalog.Presets[u.Preset]; ok {
			return p.Provider
		}
		return "openai"
	}
	return u.Kind
}

// resolveModels completes c.Models with every model an upstream serves:
// the config's fields where it sets them, else the catalogue's for the
// first upstream serving the model. Prices a model has in neither stay
// unset, and Validate refuses it.
func (c *Config) resolveModels() {
	if c.Models == nil {
		c.Models = map[string]Model{}
	}
	seen := map[string]bool{}
	defer func() {
		for name, m := range c.Models {
			if !seen[name] && m.Encoding == "" { // priced but served nowhere
				m.Encoding, m.Foreign = "o200k_base", true
				c.Models[name] = m
			}
		}
	}()
	for _, u := range c.Upstreams {
		provider := u.CatalogProvider()
		for _, name := range u.Models {
			if seen[name] {
				continue
			}
			seen[name] = true
			m := c.Models[name]
			e, ok := catalog.Lookup(provider, name)
			c.Models[name] = merge(name, m, e, ok, provider)
		}
	}
}

// merge fills m's unset fields from catalogue entry e (when found) and
// records where its prices come from.
func merge(name string, m Model, e catalog.Entry, found bool, provider string) Model {
	m.Provider = provider
	own := m.hasPrice()
	whole := m.Input.Set && (m.Output.Set || m.Embedding)
	if found {
		for _, f := range []struct {
			dst *Money
			v   int64
		}{
			{&m.Input, e.Input}, {&m.CachedInput, e.CachedInput}, {&m.CacheWrite, e.CacheWrite}, {&m.CacheWrite1h, e.CacheWrite1h}, {&m.Output, e.Output},
			{&m.Reasoning, e.Reasoning}, {&m.InputAudio, e.InputAudio}, {&m.OutputAudio, e.OutputAudio},
		} {
			if !f.dst.Set {
				*f.dst = Money{Value: f.v, Micros: true, Set: true}
			}
		}
		if m.Above == nil && e.Above != nil {
			t := e.Above
			m.Above = &Tier{Tokens: t.Above, Input: Money{Value: t.Input, Micros: true, Set: true}, CachedInput: Money{Value: t.CachedInput, Micros: true, Set: true},
				CacheWrite: Money{Value: t.CacheWrite, Micros: true, Set: true}, CacheWrite1h: Money{Value: t.CacheWrite1h, Micros: true, Set: true},
				Output: Money{Value: t.Output, Micros: true, Set: true}}
		}
		if m.MaxOutputTokens == 0 && e.Mode != "embedding" {
			m.MaxOutputTokens = e.MaxOutputTokens
		}
		if e.Mode == "embedding" {
			m.Embedding = true
		}
		_, updated := catalog.Source()
		switch {
		case whole:
			m.Priced = "config"
		case own:
			m.Priced = fmt.Sprintf("config + catalogue (%s, %s)", provider, updated)
		default:
			m.Priced = fmt.Sprintf("catalogue (%s, %s)", provider, updated)
		}
	} else if own {
		m.Priced = "config"
	}
	// A model is counted exactly only with its own encoding: OpenAI's
	// models (Azure's too) on OpenAI's encodings. Any other is counted
	// with o200k_base, scaled by its token ratio.
	openai := provider == "openai" || provider == "azure"
	if m.Encoding == "" {
		m.Encoding = catalog.Encoding(provider, name)
		if m.Encoding == "" {
			m.Encoding, openai = "o200k_base", false
		}
	}
	m.Foreign = !openai
	return m
}

// hasPrice reports whether the config gives the model any price.
func (m *Model) hasPrice() bool {
	return m.Input.Set || m.Output.Set || m.CachedInput.Set || m.CacheWrite.Set || m.CacheWrite1h.Set
}

func presetNames() string {
	names := make([]string, 0, len(catalog.Presets))
	for n := range catalog.Presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// PriceAt is model's price at upstream u: u's own prices for it where it
// sets them, else the config's price for the model, else the catalogue's
// at u's provider (a fallback or another deployment may charge
// differently from the model's first upstream), else the model's.
func (c *Config) PriceAt(u Upstream, model string) budget.Price {
	m := c.Models[model]
	if !strings.HasPrefix(m.Priced, "config") && u.CatalogProvider() != m.Provider {
		if e, ok := catalog.Lookup(u.CatalogProvider(), model); ok {
			m = merge(model, Model{WebSearch: m.WebSearch}, e, true, u.CatalogProvider()) // the search fee is the config's
		}
	}
	p := m.Price()
	if own, ok := u.Prices[model]; ok {
		p.Input, p.CachedInput, p.CacheWrite, p.Output = budget.Money(own.Input.Value), budget.Money(own.CachedInput.Value),
			budget.Money(own.CacheWrite.Value), budget.Money(own.Output.Value)
		if own.CacheWrite1h.Set {
			p.CacheWrite1h = budget.Money(own.CacheWrite1h.Value)
		}
	}
	return p
}

// Price is m's rates as the budget prices usage.
func (m Model) Price() budget.Price {
	p := budget.Price{Input: budget.Money(m.Input.Value), CachedInput: budget.Money(m.CachedInput.Value), CacheWrite: budget.Money(m.CacheWrite.Value),
		CacheWrite1h: budget.Money(m.CacheWrite1h.Value), Output: budget.Money(m.Output.Value), Reasoning: budget.Money(m.Reasoning.Value), InputAudio: budget.Money(m.InputAudio.Value),
		OutputAudio: budget.Money(m.OutputAudio.Value)}
	if m.WebSearch != nil {
		p.WebSearch = budget.Money(m.WebSearch.Price.Value)
	}
	if t := m.Above; t != nil {
		p.Above = &budget.Tier{Tokens: t.Tokens, Input: budget.Money(t.Input.Value), CachedInput: budget.Money(t.CachedInput.Value),
			CacheWrite: budget.Money(t.CacheWrite.Value), CacheWrite1h: budget.Money(t.CacheWrite1h.Value), Output: budget.Money(t.Output.Value)}
	}
	return p
}

// validateAliases checks every alias: a fresh public name whose
// deployments name an upstream that serves their model.
func (c *Config) validateAliases(v *validator, served map[string]string) {
	upstreams := map[string]*Upstream{}
	for i := range c.Upstreams {
		upstreams[c.Upstreams[i].Name] = &c.Upstreams[i]
	}
	for name, a := range c.Aliases {
		p := "aliases." + name
		if !ValidModelName(name) {
			v.addf(p, "invalid alias name %q", name)
		}
		if _, dup := served[name]; dup {
			v.addf(p, "%q is already a model an upstream serves: an alias needs a name of its own", name)
		}
		switch a.Strategy {
		case "weighted", "least_busy", "ordered":
		default:
			v.addf(p+".strategy", "unknown strategy %q (want weighted, least_busy or ordered)", a.Strategy)
		}
		if len(a.Deployments) == 0 {
			v.addf(p+".deployments", "lists no deployment")
		}
		total := 0
		for i, d := range a.Deployments {
			dp := fmt.Sprintf("%s.deployments.%d", p, i)
			u, ok := upstreams[d.Upstream]
			switch {
			case !ok:
				v.addf(dp+".upstream", "unknown upstream %q", d.Upstream)
			case !slices.Contains(u.Models, d.Model):
				v.addf(dp+".model", "upstream %q does not list model %q", d.Upstream, d.Model)
			}
			if d.Weight != nil && *d.Weight < 0 {
				v.addf(dp+".weight", "must not be negative")
			}
			total += d.Share()
		}
		if len(a.Deployments) > 0 && total == 0 && a.Strategy == "weighted" {
			v.addf(p, "every deployment has weight 0: give one a weight")
		}
	}
}

// Share is the deployment's weight (default 1).
func (d Deployment) Share() int {
	if d.Weight == nil {
		return 1
	}
	return *d.Weight
}

// ValidModelName is what a model or alias name a client sends may look
// like: printable, without spaces, at most 256 bytes.
func ValidModelName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

func (c *Config) isAlias(name string) bool {
	_, ok := c.Aliases[name]
	return ok
}
