package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/internal/testkit/apptest"
	"github.com/tollgate-dev/tollgate/policy"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// The report and ceiling commands against a running gateway.
// adminGateway serves a gateway with a ledger, run-time keys, a finance
// token (tg-cfo), an admin token (tg-root), and team acme/ml with a $10
// monthly budget and key tg-k; it returns its address.
func adminGateway(t *testing.T) string {
	t.Helper()
	sim, err := simulated.New(simulated.Options{})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(sim)
	t.Cleanup(up.Close)
	src := `
ledger_path: ` + filepath.Join(t.TempDir(), "ledger.jsonl") + `
keys_path: ` + filepath.Join(t.TempDir(), "keys.json") + `
admin_tokens: [{name: cfo, hash: "` + policy.HashKey("tg-cfo") + `", role: finance}, {name: root, hash: "` + policy.HashKey("tg-root") + `", role: admin}]
upstreams: [{name: sim, base_url: "` + up.URL + `/v1", models: [m]}]
models: {m: {encoding: o200k_base, input: "$1", output: "$2", max_output_tokens: 100}}
orgs: [{id: acme, teams: [{id: ml, limits: [{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}],
        keys: [{id: k, hash: "` + policy.HashKey("tg-k") + `"}]}]}]
`
	url, _ := apptest.Serve(t, src, nil)
	return url
}

func TestReportAndCeilingCommands(t *testing.T) {
	url := adminGateway(t)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer tg-k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", err, resp.StatusCode)
	}
	resp.Body.Close()

	var out, errOut bytes.Buffer
	args := []string{"report", "--url", url, "--token", "tg-cfo", "--by", "team,model"}
	for range 100 { // the settlement lands just after the answer
		out.Reset()
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("report: %d %s", code, errOut.String())
		}
		if strings.Contains(out.String(), "ml") {
			break
		}
	}
	if !strings.Contains(out.String(), "TEAM") || !strings.Contains(out.String(), "ml") || !strings.Contains(out.String(), " m ") {
		t.Fatalf("table:\n%s", out.String())
	}
	// The token columns carry the ledger's figures, not zeros; dollars
	// to the cent; a total.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "acme/ml" || f[3] == "0" || f[5] == "0" || !strings.HasPrefix(f[6], "$0.") ||
		!strings.HasPrefix(lines[len(lines)-1], "TOTAL") {
		t.Fatalf("table rows report no tokens:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"ceiling", "set", "--url", url, "--token", "tg-cfo", "--org", "acme", "--team", "ml",
		"--name", "usd-month", "--amount", "$20"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "$10.00 → $20.00") {
		t.Fatalf("ceiling set: %d %q %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"ceiling", "set", "--url", url, "--token", "tg-cfo", "--org", "acme", "--team", "ml",
		"--name", "usd-month", "--amount", "$30", "--for", "72h"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "$20.00 → $30.00") || !strings.Contains(out.String(), ", until ") {
		t.Fatalf("ceiling set --for: %d %q %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"ceiling", "show", "--url", url, "--token", "tg-cfo", "--org", "acme", "--team", "ml"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "usd-month") || !strings.Contains(out.String(), "$30.00* until ") || !strings.Contains(out.String(), " USED ") {
		t.Fatalf("ceiling show: %d %q %s", code, out.String(), errOut.String())
	}
	out.Reset()
	// A reset needs --yes and a reason: it lets the team spend a second
	// ceiling's worth this month.
	if code := run(context.Background(), []string{"ceiling", "reset-period", "--url", url, "--token", "tg-cfo", "--org", "acme", "--team", "ml", "--name", "usd-month"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), `Run it again with --yes --reason "why"`) {
		t.Fatalf("an unconfirmed reset: %d %q %s", code, out.String(), errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"ceiling", "reset-period", "--url", url, "--token", "tg-cfo", "--org", "acme", "--team", "ml", "--name", "usd-month", "--yes", "--reason", "a billing mistake"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "team:acme/ml:usd-month "+time.Now().UTC().Format("2006-01")+": spent ") {
		t.Fatalf("ceiling reset-period: %d %q %s", code, out.String(), errOut.String())
	}
	// The month's statement of ml, as CSV: its model's line and the total,
	// and the $30 temporary ceiling in force.
	out.Reset()
	if code := run(context.Background(), []string{"statement", "--url", url, "--token", "tg-cfo", "--org", "acme", "--team", "ml",
		"--month", time.Now().UTC().Format("2006-01")}, &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), "month,org,team,section,item,requests,") || !strings.Contains(out.String(), ",acme,ml,model,m,1,") ||
		!strings.Contains(out.String(), ",acme,ml,total,,1,") || !strings.Contains(out.String(), ",ceiling,in force at month end,,,,,30000000,30.00") {
		t.Fatalf("statement: %d %q %s", code, out.String(), errOut.String())
	}
	if code := run(context.Background(), []string{"report", "--url", url, "--token", "wrong"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "401") {
		t.Fatalf("a wrong token: %d %s", code, errOut.String())
	}

	// Keys made, listed and revoked from the command line (embedded store:
	// the registry is keys_path).
	chat := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	admin := []string{"--url", url, "--token", "tg-root"}
	out.Reset()
	if code := run(context.Background(), append([]string{"keys", "create", "--org", "acme", "--team", "ml", "--id", "etl", "--models", "m"}, admin...), &out, &errOut); code != 0 {
		t.Fatalf("keys create: %d %s", code, errOut.String())
	}
	key, _, _ := strings.Cut(strings.TrimPrefix(out.String(), "key: "), "\n")
	if !strings.HasPrefix(key, "tg-") || chat(key) != 200 {
		t.Fatalf("keys create printed %q", out.String())
	}
	out.Reset()
	if code := run(context.Background(), append([]string{"keys", "list", "--org", "acme"}, admin...), &out, &errOut); code != 0 ||
		!regexp.MustCompile(`acme\s+ml\s+etl\s+admin\s+m\s+\S+ by root\s+active`).MatchString(out.String()) ||
		!regexp.MustCompile(`acme\s+ml\s+k\s+config`).MatchString(out.String()) {
		t.Fatalf("keys list: %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), append([]string{"keys", "revoke", "--org", "acme", "--id", "etl"}, admin...), &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "acme/etl revoked at ") || chat(key) != 401 {
		t.Fatalf("keys revoke: %d %q %s", code, out.String(), errOut.String())
	}
	if code := run(context.Background(), []string{"keys", "create", "--org", "acme", "--team", "ml", "--id", "x", "--url", url, "--token", "tg-cfo"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "403") {
		t.Fatalf("finance making a key: %d %s", code, errOut.String())
	}
}

// Every money format the CLI takes, the refusal of a bare number (and of
// what a shell leaves of an unquoted "$1200"), and the confirmation rule:
// a cut below the period's spend, or by more than half, needs --yes.
func TestCeilingMoneyFormatsAndConfirmation(t *testing.T) {
	url := adminGateway(t)
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(args, "--url", url, "--token", "tg-cfo"), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	set := func(amount string, more ...string) (int, string, string) {
		return cli(append([]string{"ceiling", "set", "--org", "acme", "--team", "ml", "--name", "usd-month", "--amount", amount}, more...)...)
	}
	inForce := func() string {
		_, out, _ := cli("ceiling", "show", "--org", "acme", "--team", "ml")
		return out
	}
	for _, amount := range []string{"$1,200.50", "1200.50 USD", "1200.50", "1200500000 µ$", "1,200.50 usd", "$1200.5"} {
		if code, out, errOut := set(amount); code != 0 || !strings.Contains(out, "→ $1,200.50") {
			t.Errorf("--amount %q: %d %q %s", amount, code, out, errOut)
		}
	}
	for amount, want := range map[string]string{
		"1200": `"1200" is ambiguous: write "$1200" (or 1200 USD) for dollars, or "1200 µ$" for micro-dollars`,
		"200":  `"200" is ambiguous`, // what a shell leaves of an unquoted $1200
		"$12x": `"$12x"`, "-$99,999": "below zero", "+": "amount", "": "amount",
	} {
		code, _, errOut := set(amount)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("--amount %q: %d %s (want %q)", amount, code, errOut, want)
		}
	}
	if !strings.Contains(inForce(), "$1,200.50") {
		t.Fatalf("a refused amount changed the ceiling:\n%s", inForce())
	}
	// A signed amount is relative to the one in force.
	if code, out, errOut := set("-5 USD"); code != 0 || !strings.Contains(out, "$1,200.50 → $1,195.50") {
		t.Fatalf("--amount -5 USD: %d %q %s", code, out, errOut)
	}
	if code, out, errOut := set("+$5"); code != 0 || !strings.Contains(out, "$1,195.50 → $1,200.50") {
		t.Fatalf("--amount +$5: %d %q %s", code, out, errOut)
	}
	// By more than half: asked; within half: not.
	code, _, errOut := set("$500")
	if code != 1 || !strings.Contains(errOut, "This cuts usd-month from $1,200.50 to $500.00, by more than half. Run it again with --yes") {
		t.Fatalf("a cut by more than half: %d %s", code, errOut)
	}
	if !strings.Contains(inForce(), "$1,200.50") {
		t.Fatal("the unconfirmed cut was made")
	}
	if code, out, errOut := set("$700"); code != 0 || !strings.Contains(out, "$1,200.50 → $700.00") {
		t.Fatalf("a cut within half: %d %q %s", code, out, errOut)
	}
	if code, out, errOut := set("$500", "--yes"); code != 0 || !strings.Contains(out, "$700.00 → $500.00") {
		t.Fatalf("a confirmed cut: %d %q %s", code, out, errOut)
	}
	// Below what the period has spent: asked, even when small.
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer tg-k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", err, resp.StatusCode)
	}
	resp.Body.Close()
	code, _, errOut = set("0.000001")
	if code != 1 || !strings.Contains(errOut, "already spent or reserved this period: every request is refused until the period ends") {
		t.Fatalf("a cut below the spend: %d %s", code, errOut)
	}
	if code, out, errOut := set("0.000001", "--yes"); code != 0 || !strings.Contains(out, "→ $0.000001") {
		t.Fatalf("a confirmed freeze: %d %q %s", code, out, errOut)
	}
	// Putting the configured amount back is a cut too, and no exception.
	if code, out, errOut := set("reset"); code != 0 || !strings.Contains(out, "$0.000001 → $10.00") {
		t.Fatalf("reset: %d %q %s", code, out, errOut)
	}
}

// The report table: text to the left, figures to the right, dollars and
// cents, a total.
func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeTable(&b, [][]string{{"TEAM", "MODEL", "REQUESTS", "USD"}, {"ml", "gpt-4o", "12", "$1,200.50"}, {"search-long", "m", "3", "$0.01"}, {"TOTAL", "", "", "$1,200.51"}}, 2); err != nil {
		t.Fatal(err)
	}
	want := `TEAM         MODEL   REQUESTS        USD
ml           gpt-4o        12  $1,200.50
search-long  m              3      $0.01
TOTAL                          $1,200.51
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// Text a client controls (a user id) cannot colour the terminal, move the
// cursor or forge a line of the table: its control characters are
// written escaped.
func TestWriteTableEscapesControlCharacters(t *testing.T) {
	var b bytes.Buffer
	evil := "bob\x1b[2K\rTOTAL  $0.00\n"
	if err := writeTable(&b, [][]string{{"USER", "USD"}, {evil, "$9.00"}, {"TOTAL", "$9.00"}}, 1); err != nil {
		t.Fatal(err)
	}
	want := `USER                          USD
bob\x1b[2K\rTOTAL  $0.00\n  $9.00
TOTAL                       $9.00
`
	if b.String() != want || strings.Count(b.String(), "\n") != 3 {
		t.Fatalf("got\n%q\nwant\n%q", b.String(), want)
	}
}

// Printed cents add up to the printed total: three rows of $1.404 each
// are $4.21 and a total of $4.21, not three $1.40 beside $4.21; the cent
// left over goes to the row that lost the most.
func TestCentsAddUp(t *testing.T) {
	for _, tc := range []struct {
		micros []int64
		rows   []int64
		total  int64
	}{
		{[]int64{1_404_000, 1_404_000, 1_404_000}, []int64{141, 140, 140}, 421},
		{[]int64{5_000, 5_000, 5_000}, []int64{1, 1, 0}, 2},
		{[]int64{1_234_567, 0, 99}, []int64{123, 0, 0}, 123},
		{nil, []int64{}, 0},
	} {
		rows, total := centsThatAddUp(tc.micros)
		var sum int64
		for _, c := range rows {
			sum += c
		}
		if !slices.Equal(rows, tc.rows) || total != tc.total || sum != total {
			t.Errorf("%v: rows %v total %d, want %v %d", tc.micros, rows, total, tc.rows, tc.total)
		}
	}
}

// The admin token from the environment is never printed by -h.
func TestHelpDoesNotPrintTheToken(t *testing.T) {
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "tg-admin-secret-1234")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"report", "-h"}, &out, &out); code != 0 || strings.Contains(out.String(), "tg-admin-secret-1234") || !strings.Contains(out.String(), "TOLLGATE_ADMIN_TOKEN") {
		t.Fatalf("report -h: %d\n%s", code, out.String())
	}
}
