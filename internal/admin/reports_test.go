package admin_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/config"
	"github.com/tollgate-dev/tollgate/internal/admin"
	"github.com/tollgate-dev/tollgate/internal/ledger"
	"github.com/tollgate-dev/tollgate/internal/pgtest"
	"github.com/tollgate-dev/tollgate/policy"
)

// Month boundaries follow each org's calendar, the one its budgets reset
// on: an hour past midnight on 1 December in Tokyo is December spend, and
// 22:00 on 30 November in New York is November spend, though in UTC it
// is the other way round. With tz=UTC everybody is on UTC's calendar.
func TestReportMonthsFollowEachOrgsTimeZone(t *testing.T) {
	reportMonths(t, func(c *config.Config, entries []budget.Entry) *admin.API {
		c.LedgerPath = writeLedger(t, entries)
		return admin.New(c, nil, nil)
	})
}

// The same report from the PostgreSQL ledger, summed in SQL.
func TestPostgresReportMonthsFollowEachOrgsTimeZone(t *testing.T) {
	reportMonths(t, func(c *config.Config, entries []budget.Entry) *admin.API {
		return admin.New(c, nil, nil).WithLedger(pgLedger(t, entries))
	})
}

// writeLedger writes entries to a ledger file and returns its path.
func writeLedger(t *testing.T, entries []budget.Entry) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	var lines []string
	for _, e := range entries {
		b, _ := json.Marshal(e)
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pgLedger is a PostgreSQL ledger holding entries.
func pgLedger(t *testing.T, entries []budget.Entry) *ledger.Postgres {
	t.Helper()
	pg, err := ledger.OpenPostgres(pgtest.New(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Close)
	if err := pg.Insert(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
	return pg
}

func reportMonths(t *testing.T, open func(*config.Config, []budget.Entry) *admin.API) {
	c, err := config.Parse([]byte(`
time_zone: UTC
admin_tokens: [{name: cfo, hash: "`+policy.HashKey("tg-cfo")+`", role: finance}]
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
orgs:
  - {id: tokyo, time_zone: Asia/Tokyo, teams: [{id: t, keys: [{id: k1, hash: "`+policy.HashKey("tg-1")+`"}]}]}
  - {id: ny, time_zone: America/New_York, teams: [{id: t, keys: [{id: k2, hash: "`+policy.HashKey("tg-2")+`"}]}]}
  - {id: utc, teams: [{id: t, keys: [{id: k3, hash: "`+policy.HashKey("tg-3")+`"}]}]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	entries := []budget.Entry{
		{Org: "tokyo", Team: "t", Time: time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC), Cost: 1_000, Served: true},     // 1 Dec 01:00 in Tokyo
		{Org: "tokyo", Team: "t", Time: time.Date(2026, 11, 30, 14, 59, 0, 0, time.UTC), Cost: 7, Served: true},        // 30 Nov 23:59 in Tokyo
		{Org: "ny", Team: "t", Time: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), Cost: 20_000, Served: true},         // 30 Nov 22:00 in New York
		{Org: "ny", Team: "t", Time: time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC), Cost: 300_000, Served: true},        // 31 Oct 23:00 in New York
		{Org: "utc", Team: "t", Time: time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC), Cost: 4_000_000, Served: true}, // UTC's November
		{Org: "utc", Team: "t", Time: time.Date(2026, 11, 15, 0, 0, 0, 0, time.UTC), Cost: 50_000_000, Served: false},  // refused: no spend
	}
	for i := range entries {
		entries[i].RequestID = strconv.Itoa(i)
	}
	e := echo.New()
	open(c, entries).Mount(e)
	get := func(query string) string {
		req := httptest.NewRequest(http.MethodGet, "/admin/v1/reports?"+query, nil)
		req.Header.Set("Authorization", "Bearer tg-cfo")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	for _, tc := range []struct {
		query string
		want  map[string]string // org → usd_micros
	}{
		{"month=2026-11&by=org,month", map[string]string{"tokyo": "7", "ny": "20000", "utc": "4000000"}},
		{"month=2026-12&by=org,month", map[string]string{"tokyo": "1000"}},
		{"month=2026-10&by=org,month", map[string]string{"ny": "300000"}},
		{"month=2026-11&by=org,month&tz=UTC", map[string]string{"tokyo": "1007", "ny": "300000", "utc": "4000000"}},
		{"from=2026-11-30&to=2026-12-01&by=org,day", map[string]string{"tokyo": "7", "ny": "20000", "utc": "4000000"}},
	} {
		recs, err := csv.NewReader(strings.NewReader(get(tc.query + "&format=csv"))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range recs[1:] {
			got[r[0]] = r[6]
		}
		var rep struct {
			Rows []struct {
				Group     map[string]string `json:"group"`
				USDMicros int64             `json:"usd_micros"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(get(tc.query)), &rep); err != nil || len(rep.Rows) != len(recs)-1 {
			t.Fatalf("%s: json %+v vs csv %v (%v)", tc.query, rep.Rows, recs, err)
		}
		for i, r := range rep.Rows {
			if recs[i+1][0] != r.Group["org"] || recs[i+1][6] != strconv.FormatInt(r.USDMicros, 10) {
				t.Fatalf("%s: row %d json %+v, csv %v", tc.query, i, r, recs[i+1])
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v, want %v", tc.query, got, tc.want)
		}
		for org, v := range tc.want {
			if got[org] != v {
				t.Fatalf("%s: %v, want %v", tc.query, got, tc.want)
			}
		}
	}
	// The month column is the org's own month.
	if body := get("from=2026-11-01&to=2027-01-01&by=org,month"); !strings.Contains(body, `{"month":"2026-12","org":"tokyo"}`) ||
		!strings.Contains(body, `{"month":"2026-11","org":"ny"}`) {
		t.Fatalf("months: %s", body)
	}
}

// Two orgs with a team and a key of the same ids are two rows, named
// org/team and org/team/key, in the JSON and the CSV alike; an alias's
// spend is reported under the alias (model) and under the model that
// served it (served_model); a value a client controls that a spreadsheet
// would run as a formula is written as text; the file is named by its
// range. From the file ledger and from PostgreSQL.
func TestReportsAttributeByOrgAndAreSafeToOpen(t *testing.T) {
	for name, open := range map[string]func(*config.Config, []budget.Entry) *admin.API{
		"file": func(c *config.Config, entries []budget.Entry) *admin.API {
			c.LedgerPath = writeLedger(t, entries)
			return admin.New(c, nil, nil)
		},
		"postgres": func(c *config.Config, entries []budget.Entry) *admin.API {
			return admin.New(c, nil, nil).WithLedger(pgLedger(t, entries))
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := config.Parse([]byte(`
admin_tokens: [{name: cfo, hash: "`+policy.HashKey("tg-cfo")+`", role: finance}]
upstreams: [{name: u, base_url: "http://127.0.0.1:1/v1", models: [m, n]}]
models: {m: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}, n: {encoding: o200k_base, input: 0, output: 0, max_output_tokens: 10}}
aliases: {smart: {deployments: [{upstream: u, model: m}, {upstream: u, model: n}]}}
orgs:
  - {id: acme, teams: [{id: ml, keys: [{id: k, hash: "`+policy.HashKey("tg-1")+`"}]}]}
  - {id: beta, teams: [{id: ml, keys: [{id: k, hash: "`+policy.HashKey("tg-2")+`"}]}]}
`), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
			entries := []budget.Entry{
				{Org: "acme", Team: "ml", Key: "k", User: "=HYPERLINK(\"http://x\",\"pay\")", Model: "smart", ServedModel: "n", Time: at, Cost: 1_000, Served: true},
				{Org: "beta", Team: "ml", Key: "k", User: "+1-555", Model: "m", Time: at, Cost: 20_000, Served: true},
			}
			for i := range entries {
				entries[i].RequestID = strconv.Itoa(i)
			}
			e := echo.New()
			open(c, entries).Mount(e)
			get := func(query string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodGet, "/admin/v1/reports?"+query, nil)
				req.Header.Set("Authorization", "Bearer tg-cfo")
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					t.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
				}
				return rec
			}
			rec := get("month=2026-11&by=team,key,user,model,served_model&format=csv")
			if cd := rec.Header().Get("Content-Disposition"); cd != `attachment; filename="tollgate-report-2026-11-01-to-2026-12-01.csv"` {
				t.Errorf("Content-Disposition %q", cd)
			}
			recs, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range recs[1:] {
				got[strings.Join(r[:5], " | ")] = r[9]
			}
			want := map[string]string{
				`acme/ml | acme/ml/k | '=HYPERLINK("http://x","pay") | smart | n`: "1000",
				`beta/ml | beta/ml/k | '+1-555 | m | m`:                           "20000",
			}
			if len(got) != len(want) {
				t.Fatalf("rows %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("row %q: %q, want %q (rows %v)", k, got[k], v, got)
				}
			}
			// The JSON keeps the values as they are.
			if body := get("month=2026-11&by=team,user").Body.String(); !strings.Contains(body, `"team":"acme/ml"`) || !strings.Contains(body, `"user":"=HYPERLINK(`) {
				t.Errorf("JSON report: %s", body)
			}
		})
	}
}
