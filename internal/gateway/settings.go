package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/internal/metrics"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/breaker"
	"github.com/tollgate-dev/tollgate/upstream/queue"
)

// Settings is everything the gateway derives from a config. A request
// takes one snapshot (Gateway.Settings) and keeps it to its end.
type Settings struct {
	cfg        *config.Config
	dir        *policy.Directory
	routes     map[string]*route // by the name clients send: a model or an alias
	routeNames []string
	lease      time.Duration
	// What a route does when the store is unavailable (fail_closed when
	// absent), and the divisor of limits for local_fallback.
	onUnavailable map[string]string
	instances     int64
	// paid are the generic paid HTTP routes by name.
	paid map[string]*paidRoute
	// paidNames are the paid routes' names, in config order.
	paidNames []string
	// trusted proxies, for client IPs; authFail is the per-IP limit on
	// failed authentications (Failures 0: off).
	trusted    []netip.Prefix
	authFail   authguard.Policy
	bypass     *bypass
	routeCosts map[string]int64
	userHeader string // config's user_header, canonical
	// fixed are the parts a reload cannot change (the store, the listener,
	// the paid routes' prefixes, which are mounted once).
	fixed string
}

// Config is the config the settings were derived from.
func (st *Settings) Config() *config.Config { return st.cfg }

// UserHeader is the header naming a request's end user (the config's
// user_header), in canonical form.
func (st *Settings) UserHeader() string { return st.userHeader }

// Trusted are the proxies whose X-Forwarded-For names the client.
func (st *Settings) Trusted() []netip.Prefix { return st.trusted }

// AuthFailures is the lockout policy of failed authentications.
func (st *Settings) AuthFailures() authguard.Policy { return st.authFail }

// PaidRoutes are the paid routes' names, in config order.
func (st *Settings) PaidRoutes() []string { return st.paidNames }

// Model is one model (or alias) a key may be offered: its name and the
// upstream that serves it first.
type Model struct{ Name, Upstream string }

// Models are the models and aliases p may use, in config order.
func (st *Settings) Models(p *policy.Principal) []Model {
	var out []Model
	for _, name := range st.routeNames {
		if p.Allows(name) {
			out = append(out, Model{Name: name, Upstream: st.routes[name].deployments[0].target.name})
		}
	}
	return out
}

// target is one upstream endpoint with its protection: a transport with its
// timeouts, a breaker and an optional queue.
type target struct {
	name     string
	provider upstream.Provider // URL and authorisation of the upstream's dialect
	timeout  time.Duration     // the whole exchange
	// firstByte is the wait for the answer's headers (the exchange keeps
	// it, whatever the transport).
	firstByte time.Duration
	idle      time.Duration // between two stream chunks
	// rt sends the upstream requests. Its answers are taken as they
	// are, redirects included (an API's redirect is not followed, which
	// could take its key elsewhere); http.Client would add nothing but a
	// copy of the headers and its redirect loop per request.
	rt       http.RoundTripper
	series   *metrics.Upstream // its metric series, bound once
	breaker  *breaker.Breaker
	queue    *queue.Queue
	inflight *inflight // requests in flight here (shared across reloads)
	urls     urls      // its request URLs, parsed once
}

// upstreamState is what outlives a reload for an upstream name: its
// breaker, and its queue while the queue's config is unchanged.
type upstreamState struct {
	breaker  *breaker.Breaker
	queue    *queue.Queue
	queueCfg config.Queue
	inflight inflight
}

// cost is how many requests one call to route counts for.
func (st *Settings) cost(route string) int64 {
	if n, ok := st.routeCosts[route]; ok {
		return n
	}
	return 1
}

// newSettings derives the gateway's settings from c, loading tokenizers.
func (g *Gateway) newSettings(c *config.Config) (*Settings, error) {
	dir, err := policy.NewDirectory(c, nil)
	if err != nil {
		return nil, err
	}
	st := &Settings{
		cfg:           c,
		userHeader:    http.CanonicalHeaderKey(c.UserHeader),
		dir:           dir,
		routes:        map[string]*route{},
		lease:         c.Lease,
		onUnavailable: map[string]string{},
		instances:     int64(max(c.Store.Redis.Instances, 1)),
		fixed:         fmt.Sprintf("%s|%s|%s|%v|%s", c.Listen, c.MetricsListen, c.Store.Kind, c.Store.Redis.Addrs, c.Store.SnapshotPath),
		paid:          map[string]*paidRoute{},
	}
	st.bypass = newBypass(c.Bypass)
	st.routeCosts = c.RouteCosts
	for _, p := range c.TrustedProxies {
		st.trusted = append(st.trusted, netip.MustParsePrefix(p)) // validated with the config
	}
	st.authFail = authguard.Policy{Failures: c.AuthFailures.Limit, Window: c.AuthFailures.Window}
	for _, r := range c.PaidRoutes {
		p, err := newPaidRoute(r, g.transport)
		if err != nil {
			return nil, err
		}
		st.paid[r.Name] = p
		st.paidNames = append(st.paidNames, r.Name)
		st.fixed += "|" + r.Name + "=" + r.Prefix
	}
	if c.Store.Kind == "redis" {
		for _, route := range config.Routes {
			st.onUnavailable[route] = c.Store.Redis.OnUnavailable
		}
		for route, mode := range c.Store.Redis.OnUnavailableRoutes {
			st.onUnavailable[route] = mode
		}
	}
	for route, mode := range st.onUnavailable {
		if mode == "local_fallback" && g.fallback == nil {
			return nil, fmt.Errorf("gateway: route %s uses local_fallback but no fallback engine was given", route)
		}
	}
	if err := g.routeModels(c, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Reload applies c from the next request on: keys, limits, plans, models,
// prices and upstreams. Requests in flight finish on the settings they
// started with. A config that changes what cannot change at run time (the
// store, the listen addresses) is refused and the running one stays.
func (g *Gateway) Reload(c *config.Config) error {
	st, err := g.newSettings(c)
	if err != nil {
		return err
	}
	if old := g.settings.Load(); old.fixed != st.fixed {
		return errors.New("gateway: listen addresses and the store cannot change at run time; restart to apply them")
	}
	if ks := g.keySet.Load(); ks != nil {
		// Run-time keys take the limits of their team as the new config has them.
		if err := g.compileKeySet(ks.version, ks.keys, c); err != nil {
			return err
		}
	}
	g.settings.Store(st)
	return nil
}

// target builds the endpoint of upstream u, keeping the breaker (and the
// queue, if its config did not change) of an earlier config.
func (g *Gateway) target(u config.Upstream) (*target, error) {
	g.stateMu.Lock()
	defer g.stateMu.Unlock()
	state, ok := g.upstreams[u.Name]
	if !ok {
		name := u.Name
		state = &upstreamState{breaker: breaker.New(name,
			breaker.Settings{Failures: u.Breaker.Failures, OpenFor: u.Breaker.OpenFor, Probes: u.Breaker.Probes},
			func(from, to string) {
				g.metrics.BreakerTransitions.WithLabelValues(name, to).Inc()
				g.metrics.BreakerState.WithLabelValues(name).Set(map[string]float64{"closed": 0, "half-open": 0.5, "open": 1}[to])
				g.log.Warn("upstream breaker", "upstream", name, "from", from, "to", to)
			}, nil)}
		g.metrics.BreakerState.WithLabelValues(name).Set(0)
		g.upstreams[u.Name] = state
	}
	var qcfg config.Queue
	if u.Queue != nil {
		qcfg = *u.Queue
	}
	if state.queue == nil || qcfg != state.queueCfg {
		state.queue, state.queueCfg = nil, qcfg
		if u.Queue != nil {
			var pacer queue.Pacer
			if g.pacer != nil {
				pacer = g.pacer(u.Name)
			}
			state.queue = queue.New(queue.Config{MaxLength: qcfg.MaxLength, Rate: qcfg.Rate, TokensPerMinute: qcfg.TokensPerMinute,
				Concurrency: qcfg.Concurrency, MaxWait: qcfg.MaxWait}, nil, pacer)
		}
	}
	rt := g.transport
	if rt == nil {
		rt = newTransport(u.ConnectTimeout)
	}
	pc := upstream.ProviderConfig{Kind: u.Kind, BaseURL: u.BaseURL, APIKey: u.APIKey, APIVersion: u.APIVersion, Deployments: u.Deployments,
		Region: u.Region, AccessKeyID: u.AccessKeyID, SecretKey: u.SecretAccessKey, SessionToken: u.SessionToken, Project: u.Project, Location: u.Location}
	if u.CredentialsFile != "" {
		var err error
		if pc.Credentials, err = os.ReadFile(u.CredentialsFile); err != nil {
			return nil, fmt.Errorf("gateway: upstream %s: %w", u.Name, err)
		}
	}
	provider, err := upstream.NewProvider(pc)
	if err != nil {
		return nil, fmt.Errorf("gateway: upstream %s: %w", u.Name, err)
	}
	return &target{
		name: u.Name, provider: provider, timeout: u.Timeout, firstByte: u.FirstByteTimeout, idle: u.IdleTimeout,
		rt:      rt,
		series:  g.metrics.UpstreamOf(u.Name),
		breaker: state.breaker, queue: state.queue, inflight: &state.inflight,
	}, nil
}

// newTransport is an upstream's transport. The wait for an answer's
// headers is not its (ResponseHeaderTimeout): each attempt's exchange
// keeps it.
func newTransport(connect time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
