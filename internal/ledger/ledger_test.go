package ledger

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

func TestAppendConcurrentlyAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if err := l.Append(budget.Entry{Time: time.Now(), ReservationID: "r" + string(rune('a'+i%26)), Team: "ml", Cost: budget.Money(i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	var sum budget.Money
	if err := Read(path, func(e budget.Entry) error { n++; sum += e.Cost; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 200 || sum != 199*200/2 {
		t.Fatalf("read %d entries worth %d", n, sum)
	}
}

// A crash mid-write leaves a torn last line. Reading skips it; reopening
// cuts it off, so the next entry starts on its own line and is not lost.
func TestTornLastLineIsCutOffOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(budget.Entry{ReservationID: "r1", Cost: 1}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"reservation_id":"torn","usd_micros":10`)
	f.Close()
	if got := readAll(t, path); len(got) != 1 || got[0] != "r1" {
		t.Fatalf("with a torn tail: %v", got)
	}
	l, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(budget.Entry{ReservationID: "r2", Cost: 2}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if got := readAll(t, path); len(got) != 2 || got[1] != "r2" {
		t.Fatalf("after reopening: %v", got)
	}
}

// A bad line that is not the last is damage, not a crash: Read says so
// instead of leaving spend out of a report.
func TestReadRefusesADamagedLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte("{\"reservation_id\":\"r1\"}\nnot json\n{\"reservation_id\":\"r3\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Read(path, func(budget.Entry) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err = %v, want line 2 named", err)
	}
}

func readAll(t *testing.T, path string) []string {
	t.Helper()
	var ids []string
	if err := Read(path, func(e budget.Entry) error { ids = append(ids, e.ReservationID); return nil }); err != nil {
		t.Fatal(err)
	}
	return ids
}
