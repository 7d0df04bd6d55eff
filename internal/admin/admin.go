// Package admin is the admin API under /admin/v1: bearer tokens with roles
// (admin, finance, viewer), spend reports read from the ledger (JSON and
// CSV), run-time ceilings with an audit trail. It talks to the budget
// engine and the ledger; it never touches a store directly.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/audit"
	"github.com/tollgate-dev/tollgate/internal/authguard"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/topk"
	"github.com/tollgate-dev/tollgate/policy"
)

// API serves the admin routes.
type API struct {
	// cfg is the config in force: the one at start, then each reload's
	// (SetConfig), so that what the API, the page and the reports show
	// of ceilings and limits is what the gateway enforces.
	cfg    atomic.Pointer[config.Config]
	engine *budget.Engine
	ledger ledger.Source
	keys   KeyManager // nil: keys are config-only
	trail  audit.Log
	log    *slog.Logger
	tokens map[[32]byte]config.AdminToken
	// guard locks out addresses that fail authentication too often (the
	// same count as the gateway's API keys); nil: no lockout.
	guard   *authguard.Guard
	fails   authguard.Policy
	trusted []netip.Prefix
	now     func() time.Time
	// refusedKeys lists the keys the gateway refused most; nil: none.
	refusedKeys func(n int) []topk.Entry
}

// WithClock makes the API read the time from now (tests).
func (a *API) WithClock(now func() time.Time) *API {
	a.now = now
	return a
}

// WithGuard locks out addresses that present wrong admin tokens too often
// (config auth_failures), counted with the gateway's failures from them.
func (a *API) WithGuard(g *authguard.Guard) *API {
	a.guard = g
	a.fails = authguard.Policy{Failures: a.config().AuthFailures.Limit, Window: a.config().AuthFailures.Window}
	for _, p := range a.config().TrustedProxies {
		a.trusted = append(a.trusted, netip.MustParsePrefix(p)) // validated with the config
	}
	return a
}

// lockedOut answers a locked-out address with 429 and Retry-After; failed
// counts this request as a failure first. done is true when it answered.
func (a *API) lockedOut(c echo.Context, failed bool) (done bool, err error) {
	if a.guard == nil {
		return false, nil
	}
	ip := authguard.ClientIP(c.Request(), a.trusted)
	check := a.guard.Locked
	if failed {
		check = a.guard.Failed
	}
	wait, locked := check(c.Request().Context(), a.fails, ip, time.Now())
	if !locked {
		return false, nil
	}
	a.log.Warn("too many failed admin authentications: address locked out", "client_ip", ip, "for", wait)
	c.Response().Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	return true, fail(c, http.StatusTooManyRequests, "too_many_auth_failures", "Too many failed authentications from this address; every token is refused until Retry-After.")
}

// WithLedger makes reports read src instead of the ledger file.
func (a *API) WithLedger(src ledger.Source) *API {
	a.ledger = src
	return a
}

// New returns the admin API for cfg.
func New(cfg *config.Config, engine *budget.Engine, log *slog.Logger) *API {
	a := &API{engine: engine, ledger: ledger.FileSource(cfg.LedgerPath), trail: audit.NewFile(cfg.AuditPath), log: log, tokens: map[[32]byte]config.AdminToken{}, now: time.Now}
	a.cfg.Store(cfg)
	for _, t := range cfg.AdminTokens {
		raw, _ := hex.DecodeString(strings.TrimPrefix(t.Hash, "sha256:")) // validated with the config
		var h [32]byte
		copy(h[:], raw)
		a.tokens[h] = t
	}
	return a
}

// config is the config in force.
func (a *API) config() *config.Config { return a.cfg.Load() }

// Reloaded makes c, a reloaded config the gateway now enforces, the one
// the API reads limits, ceilings, time zones and notices from, and
// records in the audit trail each org or team limit whose amount the
// reload changed (who: "config reload"), as it records a change made
// here. Admin tokens, trusted proxies and the lockout stay those of the
// start (a change to them needs a restart).
func (a *API) Reloaded(ctx context.Context, c *config.Config) error {
	old := a.cfg.Swap(c)
	var errs []error
	for _, o := range c.Orgs {
		scopes := []string{""}
		for _, t := range o.Teams {
			scopes = append(scopes, t.ID)
		}
		for _, team := range scopes {
			before, _ := policy.ScopeLimits(old, o.ID, team)
			now, _ := policy.ScopeLimits(c, o.ID, team)
			was := map[string]int64{}
			for _, l := range before {
				was[l.Bucket] = l.Amount
			}
			for _, l := range now {
				prev, ok := was[l.Bucket]
				if ok && prev == l.Amount {
					continue
				}
				e := auditEntry{Time: a.now().UTC(), Who: "config reload", Action: "config_limit", Target: l.Bucket, New: l.Amount}
				if ok {
					e.Old = prev
				}
				errs = append(errs, a.record(ctx, e))
			}
		}
	}
	return errors.Join(errs...)
}

//go:embed openapi.json
var openAPI []byte

// OpenAPI is the admin API's OpenAPI 3.1 document.
func OpenAPI() []byte { return openAPI }

// Mount adds the routes to e.
func (a *API) Mount(e *echo.Echo) {
	e.GET("/admin/v1/openapi.json", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/json", openAPI) })
	e.GET("/admin/", a.page, a.authenticate, a.allow("admin", "finance", "viewer"))
	e.GET("/admin/audit", a.auditPage, a.authenticate, a.allow("admin", "finance"))
	a.mountForms(e)
	g := e.Group("/admin/v1", a.authenticate)
	g.GET("/reports", a.reports, a.allow("admin", "finance", "viewer"))
	g.GET("/ceilings", a.ceilings, a.allow("admin", "finance", "viewer"))
	g.PUT("/ceilings", a.setCeiling, a.allow("admin", "finance"))
	g.POST("/ceilings/reset", a.resetPeriod, a.allow("admin", "finance"))
	g.GET("/statements", a.statement, a.allow("admin", "finance", "viewer"))
	g.GET("/audit", a.audit, a.allow("admin", "finance"))
	g.GET("/refused-keys", a.refusedKeysView, a.allow("admin", "finance"))
	g.POST("/keys", a.createKey, a.allow("admin"))
	g.GET("/keys", a.listKeys, a.allow("admin"))
	g.DELETE("/keys/:org/:id", a.revokeKey, a.allow("admin"))
}

const (
	tokenKey    = "tollgate.admin"
	rawTokenKey = "tollgate.admin.raw"    // the page's CSRF token is made from it
	cookieKey   = "tollgate.admin.cookie" // the token came in the page's cookie
)

func (a *API) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if done, err := a.lockedOut(c, false); done {
			return err
		}
		scheme, token, ok := strings.Cut(c.Request().Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			token = ""
		}
		if token == "" {
			// The web page: a token given once as ?token= (traded for a
			// cookie), or the cookie itself.
			if q := c.QueryParam("token"); q != "" && c.Path() == "/admin/" {
				token = q
			} else if ck, err := c.Cookie(cookieName); err == nil {
				token = ck.Value
				c.Set(cookieKey, true)
			}
		}
		if token == "" {
			if done, err := a.lockedOut(c, true); done {
				return err
			}
			return fail(c, http.StatusUnauthorized, "missing_admin_token", "Send an admin token as 'Authorization: Bearer TOKEN'.")
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
		t, found := a.tokens[sum]
		stored := sha256.Sum256(nil)
		if found {
			raw, _ := hex.DecodeString(strings.TrimPrefix(t.Hash, "sha256:"))
			copy(stored[:], raw)
		}
		if !found || subtle.ConstantTimeCompare(stored[:], sum[:]) != 1 {
			if done, err := a.lockedOut(c, true); done {
				return err
			}
			return fail(c, http.StatusUnauthorized, "invalid_admin_token", "Incorrect admin token.")
		}
		c.Set(tokenKey, t)
		c.Set(rawTokenKey, strings.TrimSpace(token))
		return next(c)
	}
}

func (a *API) allow(roles ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if t := caller(c); !slices.Contains(roles, t.Role) {
				return fail(c, http.StatusForbidden, "forbidden", "This token's role ("+t.Role+") may not do this.")
			}
			return next(c)
		}
	}
}

func caller(c echo.Context) config.AdminToken {
	t, _ := c.Get(tokenKey).(config.AdminToken)
	return t
}

// sees reports whether the caller may see org/team.
func sees(t config.AdminToken, org, team string) bool {
	return t.Role != "viewer" || slices.Contains(t.Teams, org+"/"+team)
}

func fail(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, map[string]any{"error": map[string]any{"message": msg, "type": "admin_error", "code": code}})
}

// auditEntry is one change, as the audit trail keeps it.
type auditEntry = audit.Entry

// record keeps a change in the audit trail, and logs it.
func (a *API) record(ctx context.Context, e auditEntry) error {
	a.log.Info("admin change", "who", e.Who, "action", e.Action, "target", e.Target, "old", e.Old, "new", e.New)
	return a.trail.Append(ctx, e)
}

func (a *API) audit(c echo.Context) error {
	out, err := a.trail.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// WithAudit keeps the audit trail in trail instead of the audit_path file.
func (a *API) WithAudit(trail audit.Log) *API {
	a.trail = trail
	return a
}
