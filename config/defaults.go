package config

import (
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/upstream/catalog"
)

// Defaults.
const (
	DefaultListen           = ":8080"
	DefaultMaxBodyBytes     = 8 << 20
	DefaultLease            = 10 * time.Minute
	DefaultUserHeader       = "X-Tollgate-User"
	DefaultSnapshotInterval = 30 * time.Second
	DefaultUpstreamTimeout  = 10 * time.Minute
	DefaultOutputCap        = 4096
	DefaultRateWindow       = time.Minute
	// DefaultAudioTokensPerSecond bounds an OpenAI audio model's input
	// audio: twice the one token per 100 ms it bills.
	DefaultAudioTokensPerSecond = 20
)

// SetDefaults fills every zero field that has a documented default.
func (c *Config) SetDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	srv := &c.Server
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&srv.ReadHeaderTimeout, 10 * time.Second}, {&srv.BodyTimeout, time.Minute}, {&srv.BodyGrace, 5 * time.Second}, {&srv.IdleTimeout, time.Minute}, {&srv.DrainTimeout, 30 * time.Second}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if srv.MinBodyRate == 0 {
		srv.MinBodyRate = 16 << 10
	}
	if srv.GCPercent == 0 {
		srv.GCPercent = 400
	}
	if srv.LimitHeaders == "" {
		srv.LimitHeaders = LimitHeadersStandard
	}
	if srv.MaxConnectionsPerAddress == 0 {
		srv.MaxConnectionsPerAddress = 1024
	}
	if srv.MaxConnections == 0 {
		srv.MaxConnections = 4096
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.TimeZone == "" {
		c.TimeZone = "UTC"
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.AuthFailures.Limit == 0 {
		c.AuthFailures.Limit = 30
	}
	if c.AuthFailures.Window == 0 {
		c.AuthFailures.Window = time.Minute
	}
	if c.Tracing.ServiceName == "" {
		c.Tracing.ServiceName = "tollgate"
	}
	if c.Tracing.SampleRatio == 0 {
		c.Tracing.SampleRatio = 1
	}
	if len(c.Alerts.Thresholds) == 0 {
		c.Alerts.Thresholds = []int64{50, 80, 100}
	}
	if c.Bypass.Window == 0 {
		c.Bypass.Window = 300 * time.Second
	}
	if c.UserHeader == "" {
		c.UserHeader = DefaultUserHeader
	}
	if c.Store.Kind == "" {
		c.Store.Kind = "embedded"
	}
	if c.Store.SnapshotInterval == 0 {
		c.Store.SnapshotInterval = DefaultSnapshotInterval
	}
	if r := &c.Store.Redis; c.Store.Kind == "redis" {
		if r.Prefix == "" {
			r.Prefix = "tg"
		}
		if r.Timeout == 0 {
			r.Timeout = time.Second
		}
		if r.SettleTimeout == 0 {
			r.SettleTimeout = time.Second
		}
		if r.LeaseFlush == 0 {
			r.LeaseFlush = 200 * time.Millisecond
		}
		if r.LeaseTTL == 0 {
			r.LeaseTTL = 10 * time.Second
		}
		if r.ReplayWindow == 0 {
			r.ReplayWindow = 10 * time.Second
		}
		if r.OnUnavailable == "" {
			r.OnUnavailable = "fail_closed"
		}
		if r.Instances == 0 {
			r.Instances = 1
		}
		if r.PoolSize == 0 {
			r.PoolSize = 256
		}
		if r.SpoolMax == 0 {
			r.SpoolMax = 100_000
		}
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Kind == "" {
			u.Kind = "openai"
		}
		if p, ok := catalog.Presets[u.Preset]; ok && u.Kind == "openai" && u.BaseURL == "" {
			u.BaseURL = p.BaseURL
		}
		if u.Timeout == 0 {
			u.Timeout = DefaultUpstreamTimeout
		}
		if u.ConnectTimeout == 0 {
			u.ConnectTimeout = 10 * time.Second
		}
		if u.FirstByteTimeout == 0 {
			u.FirstByteTimeout = 5 * time.Minute
		}
		if u.IdleTimeout == 0 {
			u.IdleTimeout = 2 * time.Minute
		}
	}
	c.resolveModels()
	for name, a := range c.Aliases {
		if a.Strategy == "" {
			a.Strategy = "weighted"
			c.Aliases[name] = a
		}
	}
	for i := range c.PaidRoutes {
		r := &c.PaidRoutes[i]
		if r.AuthHeader == "" {
			r.AuthHeader = "Authorization"
		}
		if r.Timeout == 0 {
			r.Timeout = time.Minute
		}
	}
	for name, m := range c.Models {
		c.Models[name] = m.withDefaults(name)
	}
	defaultLimits := func(ls []Limit) {
		for i := range ls {
			if ls[i].Kind == "rate" && ls[i].Window == 0 {
				ls[i].Window = DefaultRateWindow
			}
			if ls[i].OverBudget == "clamp" && ls[i].ClampMinOutputTokens == 0 {
				ls[i].ClampMinOutputTokens = 16
			}
			if ls[i].Kind == "concurrency" && ls[i].Unit == "" {
				ls[i].Unit = "requests"
			}
		}
	}
	for _, ls := range c.Plans {
		defaultLimits(ls)
	}
	for i := range c.Orgs {
		o := &c.Orgs[i]
		defaultLimits(o.Limits)
		for j := range o.Teams {
			t := &o.Teams[j]
			defaultLimits(t.Limits)
			defaultLimits(t.UserLimits)
			for _, ls := range t.ModelLimits {
				defaultLimits(ls)
			}
			for k := range t.Keys {
				defaultLimits(t.Keys[k].Limits)
			}
		}
	}
}

// withDefaults is m, the model called name, with its documented defaults:
// its token ratio (none for a model counted in bytes), its family's image, PDF page and audio figures, its
// default output cap.
func (m Model) withDefaults(name string) Model {
	if m.TokenRatio == 0 && !m.Foreign {
		m.TokenRatio = 1
	}
	if m.DigitTokens == nil {
		lower := strings.ToLower(name)
		split := m.Provider == "gemini" || strings.Contains(lower, "gemini") || strings.Contains(lower, "gemma")
		m.DigitTokens = &split
	}
	if m.ImageTokens == 0 && !m.Embedding {
		if high, low, ok := imageBound(name); ok {
			m.ImageTokens = high
			if m.ImageTokensLow == 0 {
				m.ImageTokensLow = low
			}
		}
	}
	if m.AudioTokensPerSecond == 0 && m.InputAudio.Value > 0 && (m.Provider == "openai" || m.Provider == "azure") {
		m.AudioTokensPerSecond = DefaultAudioTokensPerSecond
	}
	if m.PDFPageTokens == 0 && !m.Embedding {
		m.PDFPageTokens = pdfPageBound(name)
	}
	if m.DefaultOutputTokens == 0 && !m.Embedding {
		m.DefaultOutputTokens = min(m.MaxOutputTokens, DefaultOutputCap)
	}
	return m
}
