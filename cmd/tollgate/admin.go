package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/admin"
)

// adminFlags are the flags every admin subcommand shares.
func adminFlags(fs *flag.FlagSet) (base, token *string) {
	base = fs.String("url", envOr("TOLLGATE_URL", "http://127.0.0.1:8080"), "gateway address (env TOLLGATE_URL)")
	t := &secret{v: os.Getenv("TOLLGATE_ADMIN_TOKEN")}
	fs.Var(t, "token", "admin token (default: env TOLLGATE_ADMIN_TOKEN)")
	return base, &t.v
}

// secret is a flag whose value -h never prints: its default comes from
// the environment, and help text goes to terminals and CI logs.
type secret struct{ v string }

func (s *secret) String() string     { return "" }
func (s *secret) Set(v string) error { s.v = v; return nil }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func adminDo(method, base, token, path string, body io.Reader) ([]byte, error) {
	if token == "" {
		return nil, &usageError{msg: "no admin token: give --token or set TOLLGATE_ADMIN_TOKEN (tollgate keys new makes one; its hash goes in admin_tokens)"}
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base, "/")+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		// The API's error in words; its body whole if it has none.
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return nil, &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
		}
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	return data, nil
}

// apiError is an admin API refusal: its status, code and words.
type apiError struct {
	Status        int
	Code, Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
}

// report prints a spend report: tollgate report --month 2026-11 --by team,model --format table|csv|json
func report(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	base, token := adminFlags(fs)
	month := fs.String("month", time.Now().UTC().Format("2006-01"), "YYYY-MM")
	from := fs.String("from", "", "first day YYYY-MM-DD (with --to, instead of --month)")
	to := fs.String("to", "", "day after the last YYYY-MM-DD")
	by := fs.String("by", "team", "comma-separated: org, team (org/team), key (org/team/key), user, model, served_model, route, upstream, day, month")
	team := fs.String("team", "", "only org/team")
	tz := fs.String("tz", "", "time zone of days and months (default: the gateway's)")
	format := fs.String("format", "table", "table, csv or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	q := url.Values{"by": {*by}}
	if *from != "" || *to != "" {
		q.Set("from", *from)
		q.Set("to", *to)
	} else {
		q.Set("month", *month)
	}
	for k, v := range map[string]string{"team": *team, "tz": *tz} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *format == "csv" {
		q.Set("format", "csv")
	}
	data, err := adminDo(http.MethodGet, *base, *token, "/admin/v1/reports?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if *format != "table" {
		_, err := stdout.Write(data)
		return err
	}
	// The rows are the admin API's own type: a struct of look-alike fields
	// here once read "input_tokens" into nothing and printed 0 tokens.
	var rep struct {
		By   []string    `json:"by"`
		Rows []admin.Row `json:"rows"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		return err
	}
	header := append(slices.Clone(rep.By), "requests", "input", "cached", "output", "usd")
	for i := range header {
		header[i] = strings.ToUpper(header[i])
	}
	rows := [][]string{header}
	micros := make([]int64, len(rep.Rows))
	for i, r := range rep.Rows {
		micros[i] = int64(r.USDMicros)
	}
	cents, total := centsThatAddUp(micros)
	for i, r := range rep.Rows {
		row := make([]string, 0, len(header))
		for _, d := range rep.By {
			row = append(row, r.Group[d])
		}
		rows = append(rows, append(row, strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.InputTokens, 10),
			strconv.FormatInt(r.CachedInputTokens, 10), strconv.FormatInt(r.OutputTokens, 10), budget.Money(cents[i]*10_000).Dollars()))
	}
	foot := make([]string, len(header))
	foot[0], foot[len(foot)-1] = "TOTAL", budget.Money(total*10_000).Dollars()
	rows = append(rows, foot)
	return writeTable(stdout, rows, len(rep.By))
}

// centsThatAddUp rounds amounts (µ$, not negative) to cents so that the
// rows add up to their total as printed: the total rounded half up, each
// row rounded down, and the cents left over given to the rows that lost
// the most (largest remainder). Rows rounded each on its own printed
// $4.21 beside a total of $4.34.
func centsThatAddUp(micros []int64) (rows []int64, total int64) {
	var sum int64
	rows = make([]int64, len(micros))
	for i, m := range micros {
		sum += m
		rows[i] = m / 10_000
	}
	total = (sum + 5_000) / 10_000
	left := total
	for _, c := range rows {
		left -= c
	}
	order := make([]int, len(micros))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(micros[b]%10_000, micros[a]%10_000) })
	for _, i := range order[:min(int(max(left, 0)), len(order))] {
		rows[i]++
	}
	return rows, total
}

// graphic is s with its non-graphic characters escaped as Go does.
func graphic(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsGraphic(r) }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

// writeTable writes rows in columns: the first text columns aligned left,
// the figures after them right, two spaces apart. A cell's control and
// other non-graphic characters are written escaped (\n, \x1b): text from
// requests (a user id) must not move the cursor, colour the terminal or
// forge a line of the table (a TOTAL of its own).
func writeTable(w io.Writer, rows [][]string, text int) error {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, cell := range r {
			r[i] = graphic(cell)
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		line := make([]string, len(r))
		for i, cell := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i < text {
				line[i] = cell + pad
			} else {
				line[i] = pad + cell
			}
		}
		b.WriteString(strings.TrimRight(strings.Join(line, "  "), " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// group is a command's subcommands: their usage for -h, a usage error for
// anything else.
func group(name string, args []string, subs ...string) error {
	var b strings.Builder
	for i, sub := range subs {
		if i == 0 {
			b.WriteString("usage: tollgate ")
		} else {
			b.WriteString("       tollgate ")
		}
		b.WriteString(synopses[name+" "+sub] + "\n")
	}
	if isHelp(args) {
		return &helpShown{text: b.String()}
	}
	if len(args) == 0 {
		return misuse(name, "want a subcommand: %s", strings.Join(subs, ", "))
	}
	return misuse(name, "unknown subcommand %q (want %s)", args[0], strings.Join(subs, ", "))
}

// ceiling reads and changes budgets at run time: set, show, reset-period.
func ceiling(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return group("ceiling", args, "set", "show", "reset-period")
	}
	switch args[0] {
	case "set":
		return ceilingSet(args[1:], stdout)
	case "show":
		return ceilingShow(args[1:], stdout)
	case "reset-period":
		return ceilingResetPeriod(args[1:], stdout)
	}
	return group("ceiling", args, "set", "show", "reset-period")
}

// adminJSON sends in (if not nil) as JSON and decodes the answer into out.
func adminJSON(method, base, token, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	data, err := adminDo(method, base, token, path, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// budgetFlags are the flags naming one budget.
func budgetFlags(fs *flag.FlagSet) (org, team, key, name *string) {
	org = fs.String("org", "", "org id")
	team = fs.String("team", "", "team id (empty: the org's own budget)")
	key = fs.String("key", "", "key id: the key's own budget")
	name = fs.String("name", "", "budget name")
	return org, team, key, name
}

// ceilingShow prints a team's (or an org's) budgets as a table.
func ceilingShow(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ceiling show", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org := fs.String("org", "", "org id")
	team := fs.String("team", "", "team id (empty: the org's own budgets)")
	key := fs.String("key", "", "key id: the key's own budgets")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	q := url.Values{"org": {*org}}
	if *team != "" {
		q.Set("team", *team)
	}
	if *key != "" {
		q.Set("key", *key)
	}
	var out struct {
		Budgets []admin.CeilingView `json:"budgets"`
	}
	if err := adminJSON(http.MethodGet, *base, *token, "/admin/v1/ceilings?"+q.Encode(), nil, &out); err != nil {
		return err
	}
	rows := [][]string{{"BUDGET", "UNIT", "PERIOD", "RESETS", "CONFIGURED", "IN FORCE", "USED", "REMAINING"}}
	for _, b := range out.Budgets {
		inForce := human(b.Unit, b.InForce)
		if b.Overridden {
			inForce += "*"
		}
		if b.OverrideUntil != nil {
			inForce += " until " + b.OverrideUntil.Format(time.RFC3339)
		}
		rows = append(rows, []string{b.Name, b.Unit, b.Period, b.ResetsAt.Format(time.RFC3339), human(b.Unit, b.Configured), inForce, human(b.Unit, b.Used), human(b.Unit, b.Remaining)})
	}
	return writeTable(stdout, rows, 4)
}

// ceilingResetPeriod starts a budget's current period over at zero spend.
func ceilingResetPeriod(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ceiling reset-period", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org, team, key, name := budgetFlags(fs)
	yes := fs.Bool("yes", false, "go ahead: the budget may then be spent whole again this period")
	reason := fs.String("reason", "", "why (required with --yes; kept in the audit trail and the statement)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var out struct {
		Budget      string `json:"budget"`
		Unit        string `json:"unit"`
		Period      string `json:"period"`
		SpentBefore int64  `json:"spent_before"`
		Remaining   int64  `json:"remaining"`
	}
	err := adminJSON(http.MethodPost, *base, *token, "/admin/v1/ceilings/reset",
		map[string]any{"org": *org, "team": *team, "key": *key, "name": *name, "confirm": *yes, "reason": *reason}, &out)
	var refused *apiError
	if errors.As(err, &refused) && refused.Code == "confirmation_required" {
		return errors.New(strings.Replace(refused.Message, `Send it again with "confirm": true and a "reason"`, `Run it again with --yes --reason "why"`, 1))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: spent %s → %s (remaining %s)\n", out.Budget, out.Period, human(out.Unit, out.SpentBefore), human(out.Unit, 0), human(out.Unit, out.Remaining))
	return nil
}

// ceilingSet sets a budget at run time: tollgate ceiling set --org acme --team ml --name usd-month --amount '$1200'
func ceilingSet(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ceiling set", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org, team, key, name := budgetFlags(fs)
	amount := fs.String("amount", "", `new amount: "$1,200.50", "1200.50 USD" or "1200.50" (a bare integer is refused: say "$1200" or "1200 µ$"), signed ("+$100", "-$50") to add to the amount in force, "reset", or "freeze" (zero until "unfreeze", which brings back what was in force before)`)
	dur := fs.String("for", "", `a temporary change: how long it lasts ("72h")`)
	until := fs.String("until", "", `a temporary change: when it lapses (RFC 3339, or "period_end")`)
	yes := fs.Bool("yes", false, "go ahead with a cut below this period's spend or by more than half")
	reason := fs.String("reason", "", "why: kept in the audit trail and the statement")
	from := fs.String("from", "", `a scheduled change: when it takes effect (RFC 3339, or "period_end": next month's ceiling, set now)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var out struct {
		Budget    string     `json:"budget"`
		Unit      string     `json:"unit"`
		Old       int64      `json:"old"`
		New       int64      `json:"new"`
		Remaining int64      `json:"remaining"`
		Until     *time.Time `json:"until"`
	}
	err := adminJSON(http.MethodPut, *base, *token, "/admin/v1/ceilings",
		map[string]any{"org": *org, "team": *team, "key": *key, "name": *name, "amount": *amount, "for": *dur, "until": *until, "confirm": *yes, "reason": *reason, "from": *from}, &out)
	var refused *apiError
	if errors.As(err, &refused) && refused.Code == "confirmation_required" {
		return errors.New(strings.Replace(refused.Message, `Send it again with "confirm": true (tollgate ceiling set --yes)`, "Run it again with --yes", 1))
	}
	if err != nil {
		return err
	}
	lapses := ""
	if out.Until != nil {
		lapses = ", until " + out.Until.Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "%s: %s → %s (remaining %s%s)\n", out.Budget, human(out.Unit, out.Old), human(out.Unit, out.New), human(out.Unit, out.Remaining), lapses)
	return nil
}

// human is an amount of unit as a person reads it: dollars and cents for a
// usd budget, the plain number otherwise.
func human(unit string, v int64) string {
	if unit == budget.Microdollars.String() {
		return budget.Money(v).Dollars()
	}
	return strconv.FormatInt(v, 10)
}

// keysCreate makes a key through the admin API and prints it, once.
func keysCreate(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org := fs.String("org", "", "org id")
	team := fs.String("team", "", "team id")
	id := fs.String("id", "", "key id, unique in the org (names it in reports)")
	models := fs.String("models", "", "comma-separated models the key may use (empty: the team's)")
	plan := fs.String("plan", "", "a configured plan whose limits apply to the key")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	req := map[string]any{"org": *org, "team": *team, "id": *id, "plan": *plan}
	if *models != "" {
		req["models"] = strings.Split(*models, ",")
	}
	var out struct {
		Key, Org, Team, ID string
	}
	if err := adminJSON(http.MethodPost, *base, *token, "/admin/v1/keys", req, &out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "key: %s\n\nGive it to its owner now: it is shown once and not stored (only its hash is).\n%s/%s (team %s) works on every instance within a second.\n",
		out.Key, out.Org, out.ID, out.Team)
	return nil
}

// keysList prints the keys a gateway knows.
func keysList(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keys list", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org := fs.String("org", "", "org id")
	team := fs.String("team", "", "team id")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	q := url.Values{}
	if *org != "" {
		q.Set("org", *org)
	}
	if *team != "" {
		q.Set("team", *team)
	}
	var out []struct {
		Org       string     `json:"org"`
		Team      string     `json:"team"`
		ID        string     `json:"id"`
		Source    string     `json:"source"`
		Models    []string   `json:"models"`
		CreatedAt *time.Time `json:"created_at"`
		CreatedBy string     `json:"created_by"`
		RevokedAt *time.Time `json:"revoked_at"`
	}
	if err := adminJSON(http.MethodGet, *base, *token, "/admin/v1/keys?"+q.Encode(), nil, &out); err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ORG\tTEAM\tKEY\tSOURCE\tMODELS\tCREATED\tSTATE")
	for _, k := range out {
		created, state := "-", "active"
		if k.CreatedAt != nil {
			created = k.CreatedAt.Format(time.RFC3339) + " by " + k.CreatedBy
		}
		if k.RevokedAt != nil {
			state = "revoked " + k.RevokedAt.Format(time.RFC3339)
		}
		models := strings.Join(k.Models, ",")
		if models == "" {
			models = "(team's)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.Org, k.Team, k.ID, k.Source, models, created, state)
	}
	return w.Flush()
}

// keysRevoke revokes a key made through the admin API.
func keysRevoke(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keys revoke", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org := fs.String("org", "", "org id")
	id := fs.String("id", "", "key id")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" || *id == "" {
		return misuse("keys revoke", "give --org and --id")
	}
	var out struct {
		RevokedAt time.Time `json:"revoked_at"`
		RevokedBy string    `json:"revoked_by"`
	}
	if err := adminJSON(http.MethodDelete, *base, *token, "/admin/v1/keys/"+url.PathEscape(*org)+"/"+url.PathEscape(*id), nil, &out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s/%s revoked at %s by %s\n", *org, *id, out.RevokedAt.Format(time.RFC3339), out.RevokedBy)
	return nil
}

// statement prints a team's monthly statement: CSV (the default), the
// printable HTML page, or JSON.
func statement(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("statement", flag.ContinueOnError)
	base, token := adminFlags(fs)
	org := fs.String("org", "", "org id")
	team := fs.String("team", "", "team id (none: every team of the org in one)")
	month := fs.String("month", time.Now().UTC().AddDate(0, -1, 0).Format("2006-01"), "YYYY-MM (default: last month)")
	format := fs.String("format", "csv", "csv, html or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *org == "" {
		return misuse("statement", "give --org (and --team for one team's)")
	}
	q := url.Values{"org": {*org}, "month": {*month}, "format": {*format}}
	if *team != "" {
		q.Set("team", *team)
	}
	data, err := adminDo(http.MethodGet, *base, *token, "/admin/v1/statements?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	_, err = stdout.Write(data)
	return err
}
