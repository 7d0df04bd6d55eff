package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// Routes are the gateway's budgeted routes, as on_unavailable_routes names them.
var Routes = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses", "/v1/messages"}

// ValidID is what org, team, key, limit and upstream ids may look like: they
// become parts of store keys and metric labels.
var ValidID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

var keyHash = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate reports every problem in c, each with its line when c was parsed
// from YAML.
func (c *Config) Validate() error {
	v := &validator{}
	c.validate(v)
	return v.err()
}

func (c *Config) validate(v *validator) {
	if _, _, err := net.SplitHostPort(c.MetricsListen); c.MetricsListen != "" && err != nil {
		v.addf("metrics_listen", "want host:port, got %q", c.MetricsListen)
	}
	if c.Server.ReadHeaderTimeout < 0 || c.Server.BodyTimeout < 0 || c.Server.BodyGrace < 0 || c.Server.IdleTimeout < 0 || c.Server.DrainTimeout < 0 {
		v.addf("server", "timeouts must not be negative")
	}
	if c.Server.MinBodyRate < 0 || c.Server.MaxConnections < 0 {
		v.addf("server", "min_body_rate and max_connections must not be negative")
	}
	if c.Server.MaxConnectionsPerAddress < -1 {
		v.addf("server.max_connections_per_address", "want a number of connections, or -1 for no bound, not %d", c.Server.MaxConnectionsPerAddress)
	}
	if c.Server.GCPercent < -1 {
		v.addf("server.gc_percent", "must be -1 (collector off) or a percentage above 0, not %d", c.Server.GCPercent)
	}
	if h := c.Server.LimitHeaders; h != "" && h != LimitHeadersStandard && h != LimitHeadersAll {
		v.addf("server.limit_headers", "must be %q or %q, not %q", LimitHeadersStandard, LimitHeadersAll, h)
	}
	if c.MaxBodyBytes < 1024 {
		v.addf("max_body_bytes", "must be at least 1024")
	}
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		v.addf("time_zone", "unknown time zone %q", c.TimeZone)
	}
	if c.Lease < time.Second {
		v.addf("lease", "must be at least 1s")
	}
	for i, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(p); err != nil {
			v.addf(fmt.Sprintf("trusted_proxies.%d", i), "want a CIDR such as 10.0.0.0/8, got %q", p)
		}
	}
	for i, th := range c.Alerts.Thresholds {
		if th < 1 || th > 1000 {
			v.addf(fmt.Sprintf("alerts.thresholds.%d", i), "a threshold is a percentage from 1 to 1000")
		}
	}
	for i, w := range c.Alerts.Webhooks {
		if u, err := url.Parse(w); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.addf(fmt.Sprintf("alerts.webhooks.%d", i), "want an http(s) URL")
		}
	}
	if e := c.Tracing.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.addf("tracing.otlp_endpoint", "want the collector's OTLP/HTTP address, e.g. http://otel-collector:4318")
		}
	}
	if r := c.Tracing.SampleRatio; r < 0 || r > 1 {
		v.addf("tracing.sample_ratio", "a share from 0 to 1")
	}
	for i, t := range c.AdminTokens {
		p := fmt.Sprintf("admin_tokens.%d", i)
		if !ValidID.MatchString(t.Name) {
			v.addf(p+".name", "invalid name %q", t.Name)
		}
		if !keyHash.MatchString(t.Hash) {
			v.addf(p+".hash", "want sha256:<64 lowercase hex digits> (run: tollgate keys new)")
		}
		switch t.Role {
		case "admin", "finance":
		case "viewer":
			if len(t.Teams) == 0 {
				v.addf(p+".teams", "a viewer names the teams it may see, as org/team")
			}
		default:
			v.addf(p+".role", "want admin, finance or viewer, got %q", t.Role)
		}
	}
	for i, b := range c.Bypass.Secrets {
		if !ValidID.MatchString(b.ID) || len(b.Secret) < 32 {
			v.addf(fmt.Sprintf("bypass.secrets.%d", i), "want an id and a secret of at least 32 characters")
		}
	}
	if c.Bypass.Window < time.Second {
		v.addf("bypass.window", "must be at least 1s")
	}
	if c.AuthFailures.Limit < -1 || c.AuthFailures.Window < time.Second {
		v.addf("auth_failures", "limit must be -1 (off) or positive, window at least 1s")
	}
	c.validateStore(v)

	c.validateModels(v)

	served := c.validateUpstreams(v)

	c.validatePaidRoutes(v)
	for name, ls := range c.Plans {
		if !ValidID.MatchString(name) {
			v.addf("plans."+name, "invalid plan name")
		}
		c.validateLimits(v, "plans."+name, ls)
	}
	c.validateAliases(v, served)
	c.validateOrgs(v, served)
}

func (c *Config) validateLimits(v *validator, p string, ls []Limit) {
	names := map[string]bool{}
	for i, l := range ls {
		lp := fmt.Sprintf("%s.%d", p, i)
		for j, k := range l.KeyBy {
			if k != "ip" && k != "endpoint" && k != "user" {
				v.addf(fmt.Sprintf("%s.key_by.%d", lp, j), "unknown key %q (want ip, endpoint or user)", k)
			}
		}
		for j, e := range l.Endpoints {
			if !slices.Contains(Routes, e) && !slices.ContainsFunc(c.PaidRoutes, func(r PaidRoute) bool { return r.Prefix == e }) {
				v.addf(fmt.Sprintf("%s.endpoints.%d", lp, j), "unknown route %q", e)
			}
		}
		switch {
		case l.OverBudget != "" && l.OverBudget != "refuse" && l.OverBudget != "clamp":
			v.addf(lp+".over_budget", "want refuse or clamp, got %q", l.OverBudget)
		case l.OverBudget == "clamp" && l.Kind != "budget":
			v.addf(lp+".over_budget", "only a budget clamps a request to what it has left")
		case l.ClampMinOutputTokens < 0 || l.ClampMinOutputTokens > 0 && l.OverBudget != "clamp":
			v.addf(lp+".clamp_min_output_tokens", "a positive number of tokens, with over_budget: clamp")
		}
		if l.Shards < 0 || l.Shards > 1024 || (l.Shards > 1 && l.Kind != "rate") {
			v.addf(lp+".shards", "shards (1 to 1024) split rate limits only")
		}
		if !ValidID.MatchString(l.Name) {
			v.addf(lp+".name", "invalid name %q", l.Name)
		} else if names[l.Name] {
			v.addf(lp+".name", "duplicate limit %q", l.Name)
		}
		names[l.Name] = true
		switch l.Unit {
		case "tokens", "requests", "usd":
		default:
			v.addf(lp+".unit", "unknown unit %q (want tokens, requests or usd)", l.Unit)
		}
		if l.Amount.Value <= 0 {
			v.addf(lp+".amount", "must be positive")
		}
		if (l.Amount.Dollars || l.Burst.Dollars || l.Amount.Micros || l.Burst.Micros) && l.Unit != "usd" {
			v.addf(lp+".amount", "a dollar amount needs unit usd")
		}
		if l.Unit == "usd" {
			v.usd(lp+".amount", l.Amount)
			v.usd(lp+".burst", l.Burst)
		}
		switch l.Kind {
		case "rate":
			switch l.Algorithm {
			case "", "token_bucket", "gcra":
			case "fixed_window", "sliding_window", "sliding_log":
				if l.Burst.Value != 0 {
					v.addf(lp+".burst", "a %s has no burst", l.Algorithm)
				}
				if l.Algorithm == "sliding_log" && l.Amount.Value > budget.MaxSlidingLog {
					v.addf(lp+".amount", "a sliding_log keeps one entry per request: at most %d (use sliding_window above that)", budget.MaxSlidingLog)
				}
			default:
				v.addf(lp+".algorithm", "unknown algorithm %q (want token_bucket, gcra, fixed_window, sliding_window or sliding_log)", l.Algorithm)
			}
			if l.Window < time.Millisecond || l.Window%time.Microsecond != 0 {
				v.addf(lp+".window", "must be at least 1ms, in whole microseconds")
			}
			if l.Burst.Value < 0 {
				v.addf(lp+".burst", "must not be negative")
			}
			if l.Period != "" || l.TimeZone != "" {
				v.addf(lp, "period and time_zone belong to budgets")
			}
		case "budget":
			if l.Period != "day" && l.Period != "month" {
				v.addf(lp+".period", "want day or month, got %q", l.Period)
			}
			if _, err := time.LoadLocation(l.TimeZone); l.TimeZone != "" && err != nil {
				v.addf(lp+".time_zone", "unknown time zone %q", l.TimeZone)
			}
			if l.Window != 0 || l.Burst.Value != 0 || l.Algorithm != "" {
				v.addf(lp, "window, burst and algorithm belong to rate limits")
			}
		case "concurrency":
			if l.Unit != "requests" {
				v.addf(lp+".unit", "a concurrency limit counts requests")
			}
		default:
			v.addf(lp+".kind", "unknown kind %q (want rate, budget or concurrency)", l.Kind)
		}
	}
}

// validateStore checks the store section.
func (c *Config) validateStore(v *validator) {
	switch c.Store.Kind {
	case "embedded":
		if c.LedgerPostgres != "" && c.LedgerPath == "" {
			// The embedded store's outbox for PostgreSQL is the ledger
			// file: each entry is on disk before it is shipped.
			v.addf("ledger_postgres", "needs ledger_path with the embedded store (the file is shipped to PostgreSQL)")
		}
	case "redis":
		if c.LedgerPath != "" && c.LedgerPostgres == "" {
			// Each instance's file would hold its own settlements only:
			// a sweep of its reservation by another instance, and that
			// instance's whole share, never reach it, and a late
			// settlement's correction would reach it without the sweep
			// it corrects. The one ledger on Redis is PostgreSQL.
			v.addf("ledger_path", "alone is no ledger with store.kind redis: the file holds only this instance's settlements, "+
				"not the other instances' nor their sweeps of its reservations, so its reports are wrong; "+
				"add ledger_postgres, the one ledger every instance writes and reports read "+
				"(ledger_path may stay beside it as this instance's local copy)")
		}
		r := c.Store.Redis
		if len(r.Addrs) == 0 {
			v.addf("store.redis.addrs", "lists no address")
		}
		for i, a := range r.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				v.addf(fmt.Sprintf("store.redis.addrs.%d", i), "want host:port, got %q", a)
			}
		}
		if r.Timeout < time.Millisecond || r.SettleTimeout < time.Millisecond {
			v.addf("store.redis", "timeouts must be at least 1ms")
		}
		if strings.ContainsAny(r.Prefix, "{}") {
			v.addf("store.redis.prefix", "must not contain { or }")
		}
		checkMode := func(p, m string) {
			switch m {
			case "fail_closed", "fail_open", "local_fallback":
			default:
				v.addf(p, "want fail_closed, fail_open or local_fallback, got %q", m)
			}
		}
		checkMode("store.redis.on_unavailable", r.OnUnavailable)
		for route, m := range r.OnUnavailableRoutes {
			if !slices.Contains(Routes, route) {
				v.addf("store.redis.on_unavailable_routes."+route, "unknown route (want one of %v)", Routes)
			}
			checkMode("store.redis.on_unavailable_routes."+route, m)
		}
		if r.Instances < 1 {
			v.addf("store.redis.instances", "must be at least 1")
		}
		if r.PoolSize < 1 {
			v.addf("store.redis.pool_size", "must be at least 1")
		}
		if r.LeaseFlush < time.Millisecond || r.LeaseFlush > time.Second {
			v.addf("store.redis.lease_flush", "want 1ms to 1s, got %v", r.LeaseFlush)
		}
		if r.ReplayWindow < 0 {
			v.addf("store.redis.replay_window", "want a duration of zero (the default, 10s) or more, got %v", r.ReplayWindow)
		}
		if r.LeaseTTL < 10*r.LeaseFlush {
			v.addf("store.redis.lease_ttl", "want at least 10 × lease_flush (%v), got %v", 10*r.LeaseFlush, r.LeaseTTL)
		}
	default:
		v.addf("store.kind", "unknown store %q (want embedded or redis)", c.Store.Kind)
	}
	if c.Store.SnapshotInterval < time.Second {
		v.addf("store.snapshot_interval", "must be at least 1s")
	}
}

// validateModels checks each model's prices and token bounds.
func (c *Config) validateModels(v *validator) {
	for name, m := range c.Models {
		p := "models." + name
		if !slices.Contains(tokenizer.Encodings, m.Encoding) {
			v.addf(p+".encoding", "unknown encoding %q (want one of %v)", m.Encoding, tokenizer.Encodings)
		}
		for _, f := range []struct {
			field string
			m     Money
		}{{"input", m.Input}, {"cached_input", m.CachedInput}, {"cache_write", m.CacheWrite}, {"cache_write_1h", m.CacheWrite1h}, {"output", m.Output},
			{"reasoning", m.Reasoning}, {"input_audio", m.InputAudio}, {"output_audio", m.OutputAudio}} {
			if f.m.Value < 0 {
				v.addf(p+"."+f.field, "price must not be negative")
			}
			v.usd(p+"."+f.field, f.m)
		}
		if t := m.Above; t != nil {
			if t.Tokens <= 0 {
				v.addf(p+".above.tokens", "must be positive: the input tokens past which the tier's rates apply")
			}
			if t.Input.Value < 0 || t.CachedInput.Value < 0 || t.CacheWrite.Value < 0 || t.CacheWrite1h.Value < 0 || t.Output.Value < 0 {
				v.addf(p+".above", "price must not be negative")
			}
			for _, f := range []struct {
				field string
				m     Money
			}{{"input", t.Input}, {"cached_input", t.CachedInput}, {"cache_write", t.CacheWrite}, {"cache_write_1h", t.CacheWrite1h}, {"output", t.Output}} {
				v.usd(p+".above."+f.field, f.m)
			}
		}
		if m.Embedding {
			if m.MaxOutputTokens != 0 || m.DefaultOutputTokens != 0 {
				v.addf(p, "an embedding model has no output tokens")
			}
		} else {
			if m.MaxOutputTokens <= 0 {
				v.addf(p+".max_output_tokens", "must be positive")
			}
			if m.DefaultOutputTokens <= 0 || m.DefaultOutputTokens > m.MaxOutputTokens {
				v.addf(p+".default_output_tokens", "must be between 1 and max_output_tokens")
			}
		}
		if m.AudioTokensPerSecond < 0 || m.AudioTokensPerSecond > 10_000 {
			v.addf(p+".audio_tokens_per_second", "want 0 (audio refused) to 10000")
		}
		if m.PDFPageTokens < 0 || m.PDFPageTokens > 1_000_000 {
			v.addf(p+".pdf_page_tokens", "want 0 (PDFs refused) to 1000000")
		}
		if m.ImageTokens < 0 {
			v.addf(p+".image_tokens", "must not be negative")
		}
		if high, _, ok := imageBound(name); ok && m.ImageTokens < high && !m.Embedding {
			v.addf(p+".image_tokens", "%d is below the most one image can cost on this model family (%d input tokens): an image would be reserved for less than it bills", m.ImageTokens, high)
		}
		if m.ImageTokensLow < 0 || m.ImageTokensLow > m.ImageTokens {
			v.addf(p+".image_tokens_low", "must be between 0 and image_tokens (%d)", m.ImageTokens)
		}
		for _, f := range []struct {
			field string
			x     float64
		}{{"fast_mode", m.FastMode}, {"inference_geo_us", m.InferenceGeoUS}} {
			if f.x != 0 && (f.x < 1 || f.x > 100 || math.Abs(f.x*1000-math.Round(f.x*1000)) > 1e-6) {
				v.addf(p+"."+f.field, "want a multiple of the price from 1 to 100, in thousandths at most (Anthropic: fast_mode 6, inference_geo_us 1.1)")
			}
		}
		if ws := m.WebSearch; ws != nil {
			if ws.Price.Value <= 0 {
				v.addf(p+".web_search.price", "must be positive: what one search costs (Anthropic: \"$0.01\")")
			}
			v.usd(p+".web_search.price", ws.Price)
			if ws.MaxUses < 1 || ws.MaxUses > 100 {
				v.addf(p+".web_search.max_uses", "want 1 to 100: the most searches one request may run")
			}
			if ws.ResultTokens < 1 || ws.ResultTokens > 1_000_000 {
				v.addf(p+".web_search.result_tokens", "want 1 to 1000000: the most input tokens one search's results may add")
			}
		}
		if m.TokenRatio != 0 && (m.TokenRatio < 1 || m.TokenRatio > 4) {
			v.addf(p+".token_ratio", "must be between 1 and 4 (an upper bound never scales a count down)")
		}
	}
}

// validateUpstreams checks the upstreams and returns each served model's
// primary upstream.
func (c *Config) validateUpstreams(v *validator) map[string]string {
	served := map[string]string{} // model → its primary upstream
	upstreams := map[string]bool{}
	fallbacksOf := map[string][]string{}
	for _, u := range c.Upstreams {
		fallbacksOf[u.Name] = u.Fallbacks
	}
	for i, u := range c.Upstreams {
		p := fmt.Sprintf("upstreams.%d", i)
		if !ValidID.MatchString(u.Name) {
			v.addf(p+".name", "invalid name %q", u.Name)
		} else if upstreams[u.Name] {
			v.addf(p+".name", "duplicate upstream %q", u.Name)
		}
		upstreams[u.Name] = true
		if u.Preset != "" {
			if _, ok := catalog.Presets[u.Preset]; !ok || u.Kind != "openai" {
				v.addf(p+".preset", "unknown preset %q for kind %s (want one of %s, with kind openai)", u.Preset, u.Kind, presetNames())
			}
		}
		u.validateKind(v, p)
		for m := range u.Deployments {
			if !slices.Contains(u.Models, m) {
				v.addf(p+".deployments."+m, "model %q is not served by this upstream", m)
			}
		}
		for j, m := range u.Models {
			if u.Kind != "openai" && u.Kind != "azure" && c.Models[m].Embedding {
				v.addf(fmt.Sprintf("%s.models.%d", p, j), "a %s upstream serves no embedding model", u.Kind)
			}
		}
		// Gemini, Vertex and Bedrock have their addresses by default.
		defaulted := u.BaseURL == "" && (u.Kind == "gemini" || u.Kind == "vertex" || u.Kind == "bedrock")
		if b, err := url.Parse(u.BaseURL); !defaulted && (err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "") {
			v.addf(p+".base_url", "want an http(s) URL, got %q", u.BaseURL)
		}
		if u.Timeout < time.Second {
			v.addf(p+".timeout", "must be at least 1s")
		}
		if u.ConnectTimeout < time.Millisecond || u.FirstByteTimeout < time.Millisecond || u.IdleTimeout < time.Millisecond {
			v.addf(p, "timeouts must be at least 1ms")
		}
		for j, f := range u.PassFields {
			if known, ok := bound.Bounded(f); ok {
				what := "is a field the gateway bounds or refuses: it is never passed unread"
				if known != f {
					what = fmt.Sprintf("is %q but for case: a server that matches names case-insensitively would read it as that field, unbounded", known)
				}
				v.addf(fmt.Sprintf("%s.pass_fields.%d", p, j), "%q %s", f, what)
			}
		}
		for j, h := range u.PassHeaders {
			switch strings.ToLower(h) {
			case "authorization", "x-api-key", "api-key", "x-goog-api-key", "anthropic-beta", "anthropic-version", "host", "content-length", "content-type":
				v.addf(fmt.Sprintf("%s.pass_headers.%d", p, j), "%q is the gateway's to set (its key, the checked betas, the body's framing)", h)
			}
		}
		for j, f := range u.Fallbacks {
			if f == u.Name {
				v.addf(fmt.Sprintf("%s.fallbacks.%d", p, j), "an upstream cannot fall back to itself")
			} else if _, ok := fallbacksOf[f]; !ok {
				v.addf(fmt.Sprintf("%s.fallbacks.%d", p, j), "unknown upstream %q", f)
			}
		}
		if q := u.Queue; q != nil {
			if q.Rate < 0 || q.TokensPerMinute < 0 || q.Concurrency < 0 || q.MaxLength < 0 || q.MaxWait < 0 {
				v.addf(p+".queue", "values must not be negative")
			}
			if q.Rate == 0 && q.TokensPerMinute == 0 && q.Concurrency == 0 {
				v.addf(p+".queue", "set rate, tokens_per_minute or concurrency")
			}
		}
		for m, pr := range u.Prices {
			if !slices.Contains(u.Models, m) {
				v.addf(p+".prices."+m, "model %q is not served by this upstream", m)
			}
			if pr.Input.Value < 0 || pr.CachedInput.Value < 0 || pr.CacheWrite.Value < 0 || pr.CacheWrite1h.Value < 0 || pr.Output.Value < 0 {
				v.addf(p+".prices."+m, "price must not be negative")
			}
			for field, price := range map[string]Money{"input": pr.Input, "cached_input": pr.CachedInput, "cache_write": pr.CacheWrite, "cache_write_1h": pr.CacheWrite1h, "output": pr.Output} {
				v.usd(p+".prices."+m+"."+field, price)
			}
		}
		if len(u.Models) == 0 {
			v.addf(p+".models", "lists no model")
		}
		for j, m := range u.Models {
			if mm := c.Models[m]; !mm.hasPrice() {
				_, updated := catalog.Source()
				v.addf(fmt.Sprintf("%s.models.%d", p, j), "model %q has no price: the catalogue (%s) has no %q at %s; give it one in models.%s (input and output per million tokens)",
					m, updated, m, u.CatalogProvider(), m)
			}
			if primary, dup := served[m]; dup {
				if !slices.Contains(fallbacksOf[primary], u.Name) {
					v.addf(fmt.Sprintf("%s.models.%d", p, j), "model %q is already served by upstream %q (list %q in its fallbacks to serve it here too)", m, primary, u.Name)
				}
				continue
			}
			served[m] = u.Name
		}
	}
	return served
}

// validatePaidRoutes checks route costs and the paid HTTP routes.
func (c *Config) validatePaidRoutes(v *validator) {
	for route, cost := range c.RouteCosts {
		if !slices.Contains(Routes, route) && !slices.ContainsFunc(c.PaidRoutes, func(r PaidRoute) bool { return r.Prefix == route }) {
			v.addf("route_costs."+route, "unknown route")
		}
		if cost < 1 {
			v.addf("route_costs."+route, "must be at least 1")
		}
	}
	prefixes := map[string]bool{}
	for i, r := range c.PaidRoutes {
		p := fmt.Sprintf("paid_routes.%d", i)
		if !ValidID.MatchString(r.Name) {
			v.addf(p+".name", "invalid name %q", r.Name)
		}
		if !strings.HasPrefix(r.Prefix, "/") || strings.HasPrefix(r.Prefix, "/v1/") || r.Prefix == "/v1" ||
			strings.HasSuffix(r.Prefix, "/") || strings.ContainsAny(r.Prefix, "*:?#") {
			v.addf(p+".prefix", "want a path such as /paid/geocode, outside /v1, without a trailing slash")
		} else if prefixes[r.Prefix] {
			v.addf(p+".prefix", "duplicate prefix %q", r.Prefix)
		}
		prefixes[r.Prefix] = true
		if b, err := url.Parse(r.BaseURL); err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
			v.addf(p+".base_url", "want an http(s) URL, got %q", r.BaseURL)
		}
		v.usd(p+".per_request", r.PerRequest)
		v.usd(p+".per_unit", r.PerUnit)
		if r.PerRequest.Value < 0 || r.PerUnit.Value < 0 || r.MaxUnits < 0 {
			v.addf(p, "prices and max_units must not be negative")
		}
		if r.PerRequest.Value == 0 && r.PerUnit.Value == 0 {
			v.addf(p, "set per_request, per_unit or both: a paid route needs a price")
		}
		if r.PerUnit.Value > 0 && ((r.UnitsHeader == "") == (r.UnitsJSON == "") || r.MaxUnits == 0) {
			v.addf(p, "per_unit needs exactly one of units_header and units_json, and max_units")
		}
		switch n := r.UnitsLimit.Sources(); {
		case r.PerUnit.Value > 0 && n != 1:
			v.addf(p+".units_limit", "a route priced per_unit needs exactly one place each request states the most units it may use, checked against max_units before it is forwarded: query, header, json or body_bytes (e.g. units_limit: {query: limit}); units no request bounds cannot be reserved")
		case r.PerUnit.Value == 0 && n != 0:
			v.addf(p+".units_limit", "only a route priced per_unit bounds units")
		}
		for j, s := range r.UnbilledStatuses {
			if s < 100 || s > 599 || s >= 200 && s < 300 {
				v.addf(fmt.Sprintf("%s.unbilled_statuses.%d", p, j), "want a non-2xx HTTP status, got %d", s)
			}
		}
	}
}

// validateKind checks what an upstream's kind needs.
func (u Upstream) validateKind(v *validator, p string) {
	switch u.Kind {
	case "openai", "anthropic", "gemini":
	case "azure":
		if u.APIVersion == "" {
			v.addf(p+".api_version", "an azure upstream needs its api-version (e.g. 2024-10-21)")
		}
	case "bedrock":
		if u.Region == "" {
			v.addf(p+".region", "a bedrock upstream needs its region (e.g. us-east-1)")
		}
		if u.APIKey == "" && (u.AccessKeyID == "" || u.SecretAccessKey == "") {
			v.addf(p, "a bedrock upstream needs access_key_id and secret_access_key (${ENV} values), or api_key")
		}
	case "vertex":
		if u.Project == "" || u.Location == "" {
			v.addf(p, "a vertex upstream needs its project and location (e.g. us-east5)")
		}
		if _, err := os.Stat(u.CredentialsFile); u.CredentialsFile == "" || err != nil {
			v.addf(p+".credentials_file", "a vertex upstream needs a service account's JSON key file: %q cannot be read", u.CredentialsFile)
		}
	default:
		v.addf(p+".kind", "unknown kind %q (want openai, azure, anthropic, gemini, vertex or bedrock)", u.Kind)
	}
}

// validateOrgs checks orgs, their teams and keys.
func (c *Config) validateOrgs(v *validator, served map[string]string) {
	checkModels := func(p string, models []string, within []string) {
		for i, m := range models {
			if _, ok := served[m]; !ok && !c.isAlias(m) {
				v.addf(fmt.Sprintf("%s.%d", p, i), "model %q is not served by any upstream", m)
			} else if len(within) > 0 && !slices.Contains(within, m) {
				v.addf(fmt.Sprintf("%s.%d", p, i), "model %q is not allowed for the team", m)
			}
		}
	}
	checkPlan := func(p, plan string) {
		if _, ok := c.Plans[plan]; plan != "" && !ok {
			v.addf(p, "unknown plan %q", plan)
		}
	}
	orgs := map[string]bool{}
	hashes := map[string]string{}
	for i, o := range c.Orgs {
		p := fmt.Sprintf("orgs.%d", i)
		if !ValidID.MatchString(o.ID) {
			v.addf(p+".id", "invalid id %q", o.ID)
		} else if orgs[o.ID] {
			v.addf(p+".id", "duplicate org %q", o.ID)
		}
		orgs[o.ID] = true
		if _, err := time.LoadLocation(o.TimeZone); o.TimeZone != "" && err != nil {
			v.addf(p+".time_zone", "unknown time zone %q", o.TimeZone)
		}
		c.validateLimits(v, p+".limits", o.Limits)
		teams := map[string]bool{}
		keys := map[string]bool{}
		for j, t := range o.Teams {
			tp := fmt.Sprintf("%s.teams.%d", p, j)
			if !ValidID.MatchString(t.ID) {
				v.addf(tp+".id", "invalid id %q", t.ID)
			} else if teams[t.ID] {
				v.addf(tp+".id", "duplicate team %q", t.ID)
			}
			teams[t.ID] = true
			checkPlan(tp+".plan", t.Plan)
			c.validateLimits(v, tp+".limits", t.Limits)
			c.validateLimits(v, tp+".user_limits", t.UserLimits)
			for m, ls := range t.ModelLimits {
				if _, ok := served[m]; !ok && !c.isAlias(m) {
					v.addf(tp+".model_limits."+m, "model %q is not served by any upstream", m)
				}
				c.validateLimits(v, tp+".model_limits."+m, ls)
			}
			checkModels(tp+".models", t.Models, nil)
			for k, key := range t.Keys {
				kp := fmt.Sprintf("%s.keys.%d", tp, k)
				if !ValidID.MatchString(key.ID) {
					v.addf(kp+".id", "invalid id %q", key.ID)
				} else if keys[key.ID] {
					v.addf(kp+".id", "duplicate key id %q in org %q", key.ID, o.ID)
				}
				keys[key.ID] = true
				if !keyHash.MatchString(key.Hash) {
					v.addf(kp+".hash", "want sha256:<64 lowercase hex digits> (run: tollgate keys new)")
				} else if other, dup := hashes[key.Hash]; dup {
					v.addf(kp+".hash", "the same key hash is already used by %s", other)
				}
				hashes[key.Hash] = o.ID + "/" + key.ID
				checkPlan(kp+".plan", key.Plan)
				c.validateLimits(v, kp+".limits", key.Limits)
				checkModels(kp+".models", key.Models, t.Models)
			}
		}
	}
}
