package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/internal/topk"
	"github.com/tollgate-dev/tollgate/policy"
)

// KeyManager makes, lists and revokes API keys (the gateway).
type KeyManager interface {
	CreateKey(ctx context.Context, k policy.RuntimeKey) (string, policy.RuntimeKey, error)
	RevokeKey(ctx context.Context, org, id, by string) (policy.RuntimeKey, bool, error)
	ListKeys(org, team string) []policy.KeyView
	RuntimeKeys() []policy.RuntimeKey
}

// WithKeys lets the API manage keys through km.
func (a *API) WithKeys(km KeyManager) *API {
	a.keys = km
	return a
}

type keyRequest struct {
	Org    string   `json:"org"`
	Team   string   `json:"team"`
	ID     string   `json:"id"`
	Models []string `json:"models"`
	Plan   string   `json:"plan"`
}

// NewKey makes a key for who; plain is the key, shown this once. Audited
// (never the key).
func (a *API) NewKey(ctx context.Context, who string, req keyRequest) (plain string, k policy.RuntimeKey, err error) {
	if req.Org == "" || req.Team == "" || req.ID == "" {
		return "", k, refuse(http.StatusBadRequest, "bad_request", "Send {org, team, id} and optionally models and plan.")
	}
	if a.keys == nil {
		return "", k, refuse(http.StatusConflict, "keys_not_configured", "This gateway keeps no run-time keys: set keys_path (embedded store) or use the Redis store.")
	}
	plain, k, err = a.keys.CreateKey(ctx, policy.RuntimeKey{Org: req.Org, Team: req.Team, ID: req.ID,
		Models: req.Models, Plan: req.Plan, CreatedBy: who})
	switch {
	case errors.Is(err, policy.ErrNoTeam):
		return "", k, refuse(http.StatusNotFound, "not_found", "No such org or team.")
	case errors.Is(err, policy.ErrKeyExists):
		return "", k, refuse(http.StatusConflict, "key_exists", "The org already has a key with this id.")
	case errors.Is(err, policy.ErrBadKey):
		return "", k, refuse(http.StatusBadRequest, "bad_key", err.Error())
	case err != nil:
		return "", k, err
	}
	view := map[string]any{"org": k.Org, "team": k.Team, "id": k.ID, "models": k.Models, "plan": k.Plan}
	if err := a.record(ctx, auditEntry{Time: k.CreatedAt, Who: who, Action: "create_key", Target: k.Org + "/" + k.ID, New: view}); err != nil {
		a.log.Error("writing the audit trail", "err", err)
		return "", k, err
	}
	return plain, k, nil
}

// createKey answers POST /admin/v1/keys {org, team, id, models?, plan?}
// with the plain key, shown this once.
func (a *API) createKey(c echo.Context) error {
	var req keyRequest
	if err := c.Bind(&req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_request", "Send {org, team, id} and optionally models and plan.")
	}
	plain, k, err := a.NewKey(c.Request().Context(), caller(c).Name, req)
	if err != nil {
		return answer(c, err)
	}
	return c.JSON(http.StatusCreated, map[string]any{"org": k.Org, "team": k.Team, "id": k.ID, "models": k.Models, "plan": k.Plan,
		"key": plain, "created_at": k.CreatedAt, "created_by": k.CreatedBy})
}

// listKeys answers GET /admin/v1/keys[?org=O[&team=T]]: config keys and
// run-time keys (revoked ones with when and by whom), never hashes.
func (a *API) listKeys(c echo.Context) error {
	if a.keys == nil {
		return c.JSON(http.StatusOK, []policy.KeyView{})
	}
	return c.JSON(http.StatusOK, a.keys.ListKeys(c.QueryParam("org"), c.QueryParam("team")))
}

// DropKey revokes a run-time key for who. Revoking again answers the
// first revocation. Audited.
func (a *API) DropKey(ctx context.Context, who, org, id string) (policy.RuntimeKey, error) {
	if a.keys == nil {
		return policy.RuntimeKey{}, refuse(http.StatusNotFound, "not_found", "No such key.")
	}
	k, now, err := a.keys.RevokeKey(ctx, org, id, who)
	switch {
	case errors.Is(err, policy.ErrNoKey):
		return k, refuse(http.StatusNotFound, "not_found", "No such key.")
	case errors.Is(err, policy.ErrConfigKey):
		return k, refuse(http.StatusConflict, "key_in_config", "The key is in the config file: remove it there and reload.")
	case err != nil:
		return k, err
	}
	if now {
		if err := a.record(ctx, auditEntry{Time: *k.RevokedAt, Who: who, Action: "revoke_key", Target: org + "/" + id,
			Old: "active", New: "revoked"}); err != nil {
			a.log.Error("writing the audit trail", "err", err)
			return k, err
		}
	}
	return k, nil
}

// revokeKey answers DELETE /admin/v1/keys/{org}/{id}.
func (a *API) revokeKey(c echo.Context) error {
	k, err := a.DropKey(c.Request().Context(), caller(c).Name, c.Param("org"), c.Param("id"))
	if err != nil {
		return answer(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"org": k.Org, "team": k.Team, "id": k.ID, "revoked_at": k.RevokedAt, "revoked_by": k.RevokedBy})
}

// WithRefusedKeys lets the API list the keys this instance refused most.
func (a *API) WithRefusedKeys(top func(n int) []topk.Entry) *API {
	a.refusedKeys = top
	return a
}

// refusedKeysView answers GET /admin/v1/refused-keys?n=10: the keys this
// instance refused most by its limits since it started, from a bounded
// sketch (each count may be over by overcount_at_most). Every instance
// keeps its own; the metric tollgate_refused_keys_top_total sums them.
func (a *API) refusedKeysView(c echo.Context) error {
	n := 10
	if v := c.QueryParam("n"); v != "" {
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 || i > 100 {
			return fail(c, http.StatusBadRequest, "bad_n", "n is a whole number from 1 to 100.")
		}
		n = i
	}
	out := []topk.Entry{}
	if a.refusedKeys != nil {
		out = a.refusedKeys(n)
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": out, "scope": "this instance, since it started"})
}
