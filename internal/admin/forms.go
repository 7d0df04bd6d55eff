package admin

import (
	"crypto/subtle"
	"errors"
	"github.com/tollgate-dev/tollgate/policy"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// The page's forms post here. Each runs the same action as the JSON API
// (so the same checks, confirmation rule and audit), then sends the
// browser back to the page it came from.

// mountForms adds the form routes.
func (a *API) mountForms(e *echo.Echo) {
	g := e.Group("/admin", a.authenticate)
	g.POST("/ceiling", a.formCeiling, a.allow("admin", "finance"), a.sameForm)
	g.POST("/reset", a.formReset, a.allow("admin", "finance"), a.sameForm)
	g.POST("/keys", a.formNewKey, a.allow("admin"), a.sameForm)
	g.POST("/keys/revoke", a.formRevokeKey, a.allow("admin"), a.sameForm)
}

// sameForm refuses a form that does not carry the caller's CSRF token or
// that comes from another site's page, when the browser's cookie signed it
// in (a bearer token in a header is not sent by another site's page).
func (a *API) sameForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if byCookie, _ := c.Get(cookieKey).(bool); !byCookie {
			return next(c)
		}
		if origin := c.Request().Header.Get("Origin"); origin != "" && origin != "null" {
			if u, err := url.Parse(origin); err != nil || u.Host != c.Request().Host {
				return pageError(c, http.StatusForbidden, "This form was sent from another site's page ("+origin+").")
			}
		}
		if subtle.ConstantTimeCompare([]byte(c.FormValue("csrf")), []byte(csrfOf(c))) != 1 {
			return pageError(c, http.StatusForbidden, "This form has no valid token: reload the page and send it again.")
		}
		return next(c)
	}
}

// back is the page a form returns to: its team's view, or the overview.
func back(c echo.Context) error {
	q := url.Values{"changed": {"1"}}
	if t := c.FormValue("team"); t != "" {
		q.Set("team", c.FormValue("org")+"/"+t)
	}
	if m := c.FormValue("month"); m != "" {
		q.Set("month", m)
	}
	return c.Redirect(http.StatusSeeOther, "/admin/?"+q.Encode())
}

// formCeiling sets a ceiling, puts the configured one back
// (action=restore), freezes or unfreezes it; a cut the rule asks about is
// shown for confirmation.
func (a *API) formCeiling(c echo.Context) error {
	req := ceilingChange{Org: c.FormValue("org"), Team: c.FormValue("team"), Name: c.FormValue("name"),
		Amount: strings.TrimSpace(c.FormValue("amount")), For: strings.TrimSpace(c.FormValue("for")), Confirm: c.FormValue("confirm") == "yes",
		Reason: strings.TrimSpace(c.FormValue("reason")), From: c.FormValue("from")}
	switch c.FormValue("action") {
	case "restore":
		req.Amount = "reset"
	case "freeze", "unfreeze":
		req.Amount = c.FormValue("action")
	}
	if u := strings.TrimSpace(c.FormValue("until")); u != "" {
		// A date from the form's date field: the change lapses as that
		// day ends on the budget's own calendar (its org's time zone,
		// the one its periods reset on), not the gateway's.
		loc := a.orgLocation(req.Org)
		if d, err := time.ParseInLocation("2006-01-02", u, loc); err == nil {
			u = d.AddDate(0, 0, 1).Format(time.RFC3339)
		}
		req.Until = u
	}
	_, err := a.ChangeCeiling(c.Request().Context(), caller(c).Name, req)
	var r *Refusal
	switch {
	case errors.As(err, &r) && r.Code == "confirmation_required":
		return render(c, http.StatusConflict, "confirm", map[string]any{"Refusal": r, "Req": req, "Until": c.FormValue("until"),
			"Month": c.FormValue("month"), "CSRF": csrfOf(c)})
	case err != nil:
		return refusedPage(c, err)
	}
	return back(c)
}

// formReset starts a budget's period over, once confirmed with a reason
// on the page it answers first.
func (a *API) formReset(c echo.Context) error {
	req := ceilingChange{Org: c.FormValue("org"), Team: c.FormValue("team"), Name: c.FormValue("name"),
		Confirm: c.FormValue("confirm") == "yes", Reason: strings.TrimSpace(c.FormValue("reason"))}
	_, err := a.ResetPeriod(c.Request().Context(), caller(c).Name, req)
	var r *Refusal
	switch {
	case errors.As(err, &r) && r.Code == "confirmation_required":
		return render(c, http.StatusConflict, "confirmreset", map[string]any{"Refusal": r, "Req": req, "Month": c.FormValue("month"), "CSRF": csrfOf(c)})
	case err != nil:
		return refusedPage(c, err)
	}
	return back(c)
}

// formNewKey makes a key and shows it, this once.
func (a *API) formNewKey(c echo.Context) error {
	req := keyRequest{Org: c.FormValue("org"), Team: c.FormValue("team"), ID: strings.TrimSpace(c.FormValue("id"))}
	for _, m := range strings.Split(c.FormValue("models"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			req.Models = append(req.Models, m)
		}
	}
	plain, k, err := a.NewKey(c.Request().Context(), caller(c).Name, req)
	if err != nil {
		return refusedPage(c, err)
	}
	return render(c, http.StatusCreated, "newkey", map[string]any{"Key": plain, "K": k})
}

// formRevokeKey revokes a run-time key.
func (a *API) formRevokeKey(c echo.Context) error {
	_, err := a.DropKey(c.Request().Context(), caller(c).Name, c.FormValue("org"), c.FormValue("id"))
	if err != nil {
		return refusedPage(c, err)
	}
	return back(c)
}

// refusedPage answers a form whose action failed: a Refusal as a page
// saying why, anything else to Echo (500).
func refusedPage(c echo.Context, err error) error {
	var r *Refusal
	if errors.As(err, &r) {
		return pageError(c, r.Status, r.Message)
	}
	return err
}

// pageError answers a form with a page saying what was refused.
func pageError(c echo.Context, status int, msg string) error {
	return render(c, status, "error", map[string]any{"Status": status, "Message": msg})
}

// orgLocation is the calendar org's budgets reset on: its time_zone, or
// the config's.
func (a *API) orgLocation(org string) *time.Location {
	c := a.config()
	for _, o := range c.Orgs {
		if o.ID == org {
			if loc, err := policy.OrgLocation(c, o); err == nil {
				return loc
			}
		}
	}
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		return time.UTC
	}
	return loc
}
