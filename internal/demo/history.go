package demo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/audit"
	"github.com/tollgate-dev/tollgate/internal/ledger"
)

// HistoryDays is how many days of spend History makes up.
const HistoryDays = 28

// Finance gives the demo an admin token (its hash), and a ledger, an audit
// trail and a key file in dir, so that the finance page opens and its
// changes are kept; notice marks the page as showing demo data.
func Finance(c *config.Config, dir, adminHash, notice string) {
	c.AdminTokens = append(c.AdminTokens, config.AdminToken{Name: "demo-admin", Role: "admin", Hash: adminHash})
	c.LedgerPath = filepath.Join(dir, "ledger.jsonl")
	c.AuditPath = filepath.Join(dir, "audit.jsonl")
	c.KeysPath = filepath.Join(dir, "keys.json")
	c.AdminNotice = notice
}

// teamMix is what a demo team spends on a day, roughly: models and the
// size of a request.
var teamMix = []struct {
	team, key string
	models    []string
	perDay    int // requests
	in, out   int64
}{
	{"demo-team", "demo-key", []string{"gpt-4o-mini", "gpt-4o"}, 40, 1_500, 300},
	{"research", "research-bot", []string{"gpt-4.1", "claude-sonnet-4-5", "gpt-4o"}, 60, 6_000, 900},
	{"support", "support-app", []string{"gpt-4o-mini", "claude-haiku-4-5", "gemini-2.5-flash"}, 120, 2_000, 250},
}

// History writes HistoryDays days of made-up spend up to now (demo-team's
// today left out, so its day budget is whole) into c's ledger, priced as
// the gateway prices it, each entry's request id starting "demo-data-";
// and, in the audit trail, a raise of research's monthly ceiling from $100
// to its configured $150 a minute ago, so that last month shows the
// ceiling it had. Seeded: every demo shows the same history.
func History(ctx context.Context, c *config.Config, now time.Time) (int, error) {
	l, err := ledger.Open(c.LedgerPath)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	loc, _ := time.LoadLocation(c.TimeZone)
	today := time.Date(now.In(loc).Year(), now.In(loc).Month(), now.In(loc).Day(), 0, 0, 0, 0, loc)
	n := 0
	for d := HistoryDays; d >= 0; d-- {
		day := today.AddDate(0, 0, -d)
		weekday := day.Weekday() != time.Saturday && day.Weekday() != time.Sunday
		for _, tm := range teamMix {
			if d == 0 && tm.team == "demo-team" {
				continue // its day budget is the one to watch: whole today
			}
			count := tm.perDay / 3
			if weekday {
				count = tm.perDay + rng.IntN(tm.perDay/2)
			}
			for i := range count {
				model := tm.models[rng.IntN(len(tm.models))]
				m := c.Models[model]
				u := budget.Usage{InputTokens: tm.in/2 + rng.Int64N(tm.in), OutputTokens: tm.out/2 + rng.Int64N(tm.out)}
				price := budget.Price{Input: budget.Money(m.Input.Value), CachedInput: budget.Money(m.CachedInput.Value), Output: budget.Money(m.Output.Value)}
				cost, err := price.Cost(u)
				if err != nil {
					return n, err
				}
				at := day.Add(8*time.Hour + time.Duration(rng.IntN(10*3600))*time.Second)
				if !at.Before(now) {
					continue
				}
				id := fmt.Sprintf("demo-data-%s-%s-%d", day.Format("20060102"), tm.team, i)
				if err := l.Append(budget.Entry{Time: at, RequestID: id, ReservationID: "demo-org/" + id, Org: "demo-org", Team: tm.team, Key: tm.key,
					Route: "/v1/chat/completions", Model: model, Upstream: "simulated", Usage: u, Cost: cost, Reserved: cost, Served: true, Outcome: "settled"}); err != nil {
					return n, err
				}
				n++
			}
		}
	}
	if err := l.Close(); err != nil {
		return n, err
	}
	raise := now.Add(-time.Minute)
	if first := today.AddDate(0, 0, 1-today.Day()); raise.Before(first) {
		raise = first
	}
	err = audit.NewFile(c.AuditPath).Append(ctx, audit.Entry{Time: raise.UTC(), Who: "demo-data", Action: "set_ceiling",
		Target: "team:demo-org/research:usd-month", Old: 100_000_000, New: 150_000_000})
	return n, err
}
