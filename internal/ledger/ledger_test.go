package ledger

import (
	"path/filepath"
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
