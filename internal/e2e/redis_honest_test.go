package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/internal/gateway"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// A request slower than its lease is swept by another instance at its full
// reservation; when its answer comes, its settlement corrects the charge
// to what the upstream reported, once, and the ledger gets the difference.
func TestLateSettlementCorrectsASweepThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	hd := newHolder(t)
	h := startWith(t, setup{
		teamLimits: `{name: usd-month, kind: budget, unit: usd, amount: "$10", period: month}`,
		sim:        simulated.Options{Before: hd.before},
		// Exact reservations: this is the other instance sweeping a
		// reservation record in Redis (a leased one lives in its
		// instance, which sweeps it itself; TestADeadInstancesSlicesAreChargedInFull
		// covers a dead lessee).
		redisAddr: srv.Addr, instances: 2, spoolDir: t.TempDir(), topExtra: "lease: 1s\n", redisExtra: "    exact: true\n",
	})
	var mu sync.Mutex
	var entries []budget.Entry
	settled := make(chan struct{}, 1)
	h.apps[0].Gateway().OnSettle(func(e budget.Entry) {
		mu.Lock()
		entries = append(entries, e)
		mu.Unlock()
		settled <- struct{}{}
	})
	done := make(chan int, 1)
	go func() {
		status, _, _, err := send(http.DefaultClient, h.urls[0], `{"model":"test-model","max_tokens":800,"messages":[{"role":"user","content":"HOLD on"}]}`)
		if err != nil {
			t.Error(err)
		}
		done <- status
	}()
	select {
	case <-hd.arrived:
	case status := <-done:
		t.Fatalf("the slow request did not reach the upstream: %d", status)
	}
	// The other instance's sweeper finds the lease run out.
	swept := 0
	testkit.WaitFor(10*time.Second, func() bool {
		n, err := h.apps[1].Engine().Store().Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		swept += n
		return swept > 0
	})
	spent, pending := h.readRedis("tg:{acme}:c:" + teamMonth + ":" + budget.PeriodID(budget.Month, time.Now(), nil))
	if swept != 1 || pending != 0 || spent < 1600 {
		t.Fatalf("swept %d: spent %d pending %d, want the reservation charged in full", swept, spent, pending)
	}
	hd.free()
	if status := <-done; status != 200 {
		t.Fatalf("the slow request: %d", status)
	}
	<-settled // the client has its answer before the gateway settles
	if spent, _ := h.redisSpent(); spent != h.reportedCost("test-model") {
		t.Fatalf("spent %d, the upstream reported %d: the late settlement did not correct the sweep", spent, h.reportedCost("test-model"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(entries) != 1 || entries[0].Outcome != "corrected" || int64(entries[0].Cost) != h.reportedCost("test-model")-int64(entries[0].Reserved) {
		t.Fatalf("ledger entries %+v: want one correction of actual - reserved", entries)
	}
}

// Failures on one instance lock the address out on the others: a wrong key
// is refused there too (429), the right key served.
func TestLockoutHoldsAcrossInstancesThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	h := startWith(t, setup{teamLimits: monthlyTen, redisAddr: srv.Addr, instances: 2, spoolDir: t.TempDir(),
		topExtra: "auth_failures: {limit: 5, window: 1m}\n"})
	body := `{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`
	for i := range 5 {
		if status, _, _, _ := sendAs(http.DefaultClient, h.urls[0], "tg-guess-"+strconv.Itoa(i), body); status != 401 {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	if status, _, _, _ := sendAs(http.DefaultClient, h.urls[1], "tg-guess-5", body); status != 429 {
		t.Fatalf("a wrong key on another instance: %d, want 429", status)
	}
	if status, _, _, _ := sendAs(http.DefaultClient, h.urls[1], testKey, body); status != 200 {
		t.Fatalf("the right key on another instance: %d, want 200", status)
	}
}

// A key's budget alerts on settled spend at 50 and 80 %, and at 100 % when
// it is exhausted — once across instances, however many requests each one
// refuses.
func TestKeyBudgetAlertsThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	var got []Alert
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a Alert
		_ = json.NewDecoder(r.Body).Decode(&a)
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	}))
	defer hook.Close()
	h := startWith(t, setup{
		teamLimits: monthlyTen,
		keyLimits:  `{name: key-usd-month, kind: budget, unit: usd, amount: "3000 µ$", period: month}`,
		sim:        simulated.Options{ReplyTokens: func(uint64) int64 { return 50 }},
		redisAddr:  srv.Addr, instances: 2, spoolDir: t.TempDir(),
		topExtra: "alerts: {webhooks: [\"" + hook.URL + "\"]}\n",
	})
	key := budget.Limit{Bucket: "key:acme/k1:key-usd-month", Partition: "acme", Name: "key-usd-month", Scope: budget.ScopeKey,
		Kind: budget.Ceiling, Unit: budget.Microdollars, Amount: 3000, Period: budget.Month}
	spentOf := func() int64 {
		st, err := h.app.Engine().Peek(context.Background(), []budget.Limit{key})
		if err != nil {
			t.Fatal(err)
		}
		return st[0].Capacity - st[0].Remaining - st[0].Held
	}
	// ~110 µ$ a request: past 80 % after 22 of them.
	for i := 0; spentOf() < 2500; i++ {
		body := `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"r` + strconv.Itoa(i) + `"}]}`
		if status, _, b, err := send(http.DefaultClient, h.urls[i%2], body); err != nil || status != 200 {
			t.Fatalf("request %d: %d %s %v", i, status, b, err)
		}
	}
	// Finance freezes the key at what it spent: it is exhausted.
	if err := h.app.Engine().SetCeiling(context.Background(), key, spentOf(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if status, _, b, _ := send(http.DefaultClient, h.urls[i%2], `{"model":"test-model","max_tokens":50,"messages":[{"role":"user","content":"more"}]}`); !budgetRefused(status, b) {
			t.Fatalf("after the freeze: %d %s", status, b)
		}
	}
	byThreshold := map[int64]int{}
	testkit.WaitFor(10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		clear(byThreshold)
		for _, a := range got {
			if a.Scope == "key" && a.Key == "k1" && a.Basis == "settled" {
				byThreshold[a.Threshold]++
			}
		}
		return byThreshold[50] >= 1 && byThreshold[80] >= 1 && byThreshold[100] >= 1
	})
	if byThreshold[50] != 1 || byThreshold[80] != 1 || byThreshold[100] != 1 {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("key alerts by threshold %v (all: %+v), want one each at 50, 80 and 100", byThreshold, got)
	}
}

// Alert is the webhook body.
type Alert = gateway.Alert
