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
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/audit"
	"github.com/tollgate-dev/tollgate/internal/ledger"
)

// API serves the admin routes.
type API struct {
	cfg    *config.Config
	engine *budget.Engine
	ledger ledger.Source
	keys   KeyManager // nil: keys are config-only
	trail  audit.Log
	log    *slog.Logger
	tokens map[[32]byte]config.AdminToken
}

// WithLedger makes reports read src instead of the ledger file.
func (a *API) WithLedger(src ledger.Source) *API {
	a.ledger = src
	return a
}

// New returns the admin API for cfg.
func New(cfg *config.Config, engine *budget.Engine, log *slog.Logger) *API {
	a := &API{cfg: cfg, engine: engine, ledger: ledger.FileSource(cfg.LedgerPath), trail: audit.NewFile(cfg.AuditPath), log: log, tokens: map[[32]byte]config.AdminToken{}}
	for _, t := range cfg.AdminTokens {
		raw, _ := hex.DecodeString(strings.TrimPrefix(t.Hash, "sha256:")) // validated with the config
		var h [32]byte
		copy(h[:], raw)
		a.tokens[h] = t
	}
	return a
}

//go:embed openapi.json
var openAPI []byte

// OpenAPI is the admin API's OpenAPI 3.1 document.
func OpenAPI() []byte { return openAPI }

// Mount adds the routes to e.
func (a *API) Mount(e *echo.Echo) {
	e.GET("/admin/v1/openapi.json", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/json", openAPI) })
	e.GET("/admin/", a.page, a.authenticate, a.allow("admin", "finance", "viewer"))
	g := e.Group("/admin/v1", a.authenticate)
	g.GET("/reports", a.reports, a.allow("admin", "finance", "viewer"))
	g.GET("/ceilings", a.ceilings, a.allow("admin", "finance", "viewer"))
	g.PUT("/ceilings", a.setCeiling, a.allow("admin", "finance"))
	g.POST("/ceilings/reset", a.resetPeriod, a.allow("admin", "finance"))
	g.GET("/audit", a.audit, a.allow("admin", "finance"))
	g.POST("/keys", a.createKey, a.allow("admin"))
	g.GET("/keys", a.listKeys, a.allow("admin"))
	g.DELETE("/keys/:org/:id", a.revokeKey, a.allow("admin"))
}

const tokenKey = "tollgate.admin"

func (a *API) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
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
			}
		}
		if token == "" {
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
			return fail(c, http.StatusUnauthorized, "invalid_admin_token", "Incorrect admin token.")
		}
		c.Set(tokenKey, t)
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
