package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/budget"
	"github.com/tollgate-dev/tollgate/budget/redisstore"
	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/internal/testkit"
)

// followingClient is a client of whatever address follow last named: what
// Sentinel or a virtual IP gives an application after a failover.
func followingClient(t *testing.T, first string) (*redis.Client, func(addr string)) {
	var addr atomic.Value
	addr.Store(first)
	c := redis.NewClient(&redis.Options{Addr: first, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr.Load().(string))
		}})
	t.Cleanup(func() { c.Close() })
	return c, func(a string) { addr.Store(a) }
}

// failover kills master while replica is detached (so it lacks whatever
// master acknowledged since), then promotes the replica and
// points the client at it.
func failover(master, replica *redistest.Server, follow func(string)) {
	master.Kill()
	replica.Signal(syscall.SIGCONT)
	replica.Promote()
	follow(replica.Addr)
}

// The replica stopped receiving while the master acknowledged ten
// settled requests and one reservation still open; then the master died
// and the replica took over without them. The store finds its write mark
// below what it was told, replays what Redis lost, and the ceiling ends
// charged with every request, as the upstream billed them. Before write
// marks, the open reservation's settlement found no record under the same
// epoch and was taken for settled: its spend, and the ten requests', were
// forgiven.
func TestAFailoverToALaggingReplicaLosesNothingAcknowledged(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	rdb, follow := followingClient(t, master.Addr)
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Timeout: time.Second, SettleTimeout: time.Second})
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)

	want := pairs(t, e, team, 20, 1_000)
	replica.WaitSynced(master)
	master.Detach(replica)
	want += pairs(t, e, team, 10, 1_000)
	open, _, err := e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 5_000})
	if err != nil {
		t.Fatal(err)
	}
	failover(master, replica, follow)

	var o budget.Outcome
	if !testkit.WaitFor(10*time.Second, func() bool { o, err = e.Settle(bg, open, budget.Amounts{Cost: 3_000}); return err == nil }) {
		t.Fatal(err)
	}
	want += 3_000
	if o != budget.Settled {
		t.Fatalf("the open reservation settled as %v, want settled now", o)
	}
	if spent, pending := spentOf(t, replica.Client(), "tg", team); spent != want || pending != 0 {
		t.Fatalf("after the failover spent %d pending %d, want %d and nothing pending", spent, pending, want)
	}
	// 10 reservations, 10 settlements and the open reservation.
	if n := s.LostWrites(); n != 21 {
		t.Fatalf("replayed %d lost writes, want 21", n)
	}
}

// The same with leases, where the lost write made this instance's lessee
// record: before write marks, the next flush found no record under the
// same epoch, took it for swept and charged in full, and charged nothing.
func TestAFailoverToALaggingReplicaLosesNoLeasedSpend(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	rdb, follow := followingClient(t, master.Addr)
	team := teamCeiling("acme", 100*budget.Dollar)
	// Another instance made the org's epoch, and it reached the replica.
	other := budget.NewEngine(redisstore.New(rdb, redisstore.Options{Prefix: "tg"}), time.Minute)
	want := pairs(t, other, team, 1, 1_000)
	replica.WaitSynced(master)

	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Timeout: time.Second, SettleTimeout: time.Second,
		Partitions: []string{"acme"}, Leases: &redisstore.LeaseOptions{Flush: time.Hour}})
	e := budget.NewEngine(s, time.Minute)
	master.Detach(replica)
	want += pairs(t, e, team, 20, 1_000)
	if err := s.FlushLeases(bg); err != nil {
		t.Fatal(err)
	}
	want += pairs(t, e, team, 5, 1_000) // not flushed yet
	failover(master, replica, follow)

	returnLeases(t, s)
	if spent, pending := spentOf(t, replica.Client(), "tg", team); spent != want || pending != 0 {
		t.Fatalf("after the failover spent %d pending %d, want %d and nothing pending", spent, pending, want)
	}
	if s.LostWrites() == 0 {
		t.Fatal("no lost write replayed")
	}
}

// Redis lost more than the store keeps to replay: the org is refused
// (fail closed) and OnLost told, until the org is rebuilt.
func TestALossPastTheReplayWindowRefusesTheOrg(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	rdb, follow := followingClient(t, master.Addr)
	lost := make(chan string, 1)
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Timeout: time.Second, SettleTimeout: time.Second,
		ReplayWindow: time.Nanosecond, OnLost: func(p string) { lost <- p }})
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)
	pairs(t, e, team, 2, 1_000)
	replica.WaitSynced(master)
	master.Detach(replica)
	pairs(t, e, team, 3, 1_000)
	failover(master, replica, follow)

	var err error
	if !testkit.WaitFor(10*time.Second, func() bool {
		_, _, err = e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 1})
		return errors.Is(err, redisstore.ErrPartitionLost)
	}) {
		t.Fatalf("a reservation after the loss: %v, want the org refused", err)
	}
	if !errors.Is(err, budget.ErrStoreUnavailable) {
		t.Fatalf("%v is not a store outage (the gateway's 503)", err)
	}
	if p := <-lost; p != "acme" {
		t.Fatalf("OnLost(%q)", p)
	}
	if got := s.LostPartitions(); len(got) != 1 || got[0] != "acme" {
		t.Fatalf("lost partitions %v", got)
	}
	if err := s.Rebuilt(bg, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 1}); err != nil {
		t.Fatalf("after the rebuild: %v", err)
	}
}

// Only the instance that lost a write can find it. Another instance's
// reservation after the failover must not take the room the lost one held:
// the promoted node fences the org (its replication id is not the one that
// wrote it) until the first instance has checked its marks and restored its
// reservation; then the other is refused for want of room, not admitted past
// the ceiling.
func TestAFailoverFencesTheOrgUntilLostReservationsAreBack(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	rdb, follow := followingClient(t, master.Addr)
	opts := redisstore.Options{Prefix: "tg", Timeout: time.Second, SettleTimeout: time.Second, FailoverFence: time.Second}
	a, b := redisstore.New(rdb, opts), redisstore.New(rdb, opts)
	ea, eb := budget.NewEngine(a, time.Minute), budget.NewEngine(b, time.Minute)
	team := teamCeiling("acme", 10_000)
	pairs(t, eb, team, 1, 100) // b has written the org too
	replica.WaitSynced(master)
	master.Detach(replica)
	held, _, err := ea.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 8_000})
	if err != nil {
		t.Fatal(err)
	}
	failover(master, replica, follow)

	// b comes first: fenced, not admitted into the room a's reservation held.
	var berr error
	if !testkit.WaitFor(10*time.Second, func() bool {
		_, _, berr = eb.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 5_000})
		return errors.Is(berr, redisstore.ErrFenced)
	}) {
		t.Fatalf("b's reservation after the failover: %v, want fenced", berr)
	}
	if err := a.CheckMarks(bg, 0); err != nil {
		t.Fatal(err)
	}
	if a.LostWrites() != 1 {
		t.Fatalf("a replayed %d writes, want its reservation", a.LostWrites())
	}
	// Past the fence b is refused for want of room.
	if !testkit.WaitFor(10*time.Second, func() bool {
		_, _, berr = eb.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 5_000})
		return !errors.Is(berr, budget.ErrStoreUnavailable)
	}) {
		t.Fatalf("b still refused as unavailable: %v", berr)
	}
	if !budget.IsBudgetRefusal(berr) {
		t.Fatalf("b's reservation past the fence: %v, want refused for want of room", berr)
	}
	if _, err := ea.Settle(bg, held, budget.Amounts{Cost: 8_000}); err != nil {
		t.Fatal(err)
	}
	if spent, pending := spentOf(t, replica.Client(), "tg", team); spent != 8_100 || pending != 0 {
		t.Fatalf("spent %d pending %d, want 8100 and nothing pending", spent, pending)
	}
}

// A ceiling change finance made, acknowledged by a master whose replica
// had not received it: after the failover the change is written again at
// the instance's next check, not silently undone.
func TestACeilingChangeLostInAFailoverIsWrittenAgain(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.StartReplica(t, master)
	rdb, follow := followingClient(t, master.Addr)
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Timeout: time.Second, SettleTimeout: time.Second})
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)
	pairs(t, e, team, 1, 1_000)
	replica.WaitSynced(master)
	master.Detach(replica)
	if err := e.SetCeiling(bg, team, int64(300*budget.Dollar), time.Time{}); err != nil {
		t.Fatal(err)
	}
	failover(master, replica, follow)
	if !testkit.WaitFor(10*time.Second, func() bool { return s.CheckMarks(bg, 0) == nil }) {
		t.Fatal("the mark check never reached the promoted replica")
	}
	amount, _, ok, err := s.Override(bg, "acme", team.Bucket)
	if err != nil || !ok || amount != int64(300*budget.Dollar) {
		t.Fatalf("the ceiling after the failover: %d %v %v, want the $300 finance set", amount, ok, err)
	}
}

// Redis's own bound on the loss: a master with min-replicas-to-write 1 and
// min-replicas-max-lag 1 refuses writes once its replica has not
// acknowledged for a second, so a failover can lose at most that second —
// well within the replay window. The store reads the refusal as Redis
// unavailable (503, fail closed), and after the failover the writes it
// lost are replayed: the ceiling has every request.
func TestMinReplicasBoundsWhatAFailoverLoses(t *testing.T) {
	master := redistest.Start(t, "--min-replicas-to-write", "1", "--min-replicas-max-lag", "1")
	replica := redistest.StartReplica(t, master)
	rdb, follow := followingClient(t, master.Addr)
	s := redisstore.New(rdb, redisstore.Options{Prefix: "tg", Timeout: time.Second, SettleTimeout: time.Second})
	e := budget.NewEngine(s, time.Minute)
	team := teamCeiling("acme", 100*budget.Dollar)
	want := pairs(t, e, team, 5, 1_000)
	replica.WaitSynced(master)
	master.Detach(replica)
	var err error
	accepted := 0
	if !testkit.WaitFor(10*time.Second, func() bool {
		var r *budget.Reservation
		r, _, err = e.Reserve(bg, []budget.Limit{team}, budget.Amounts{Cost: 2_000})
		if err != nil {
			return true
		}
		if _, err = e.Settle(bg, r, budget.Amounts{Cost: 1_000}); err != nil {
			return true
		}
		want += 1_000
		accepted++
		return false
	}) || !errors.Is(err, budget.ErrStoreUnavailable) || !strings.Contains(err.Error(), "NOREPLICAS") {
		t.Fatalf("with its replica gone the master still took writes: %v", err)
	}
	failover(master, replica, follow)
	if !testkit.WaitFor(10*time.Second, func() bool { return s.CheckMarks(bg, 0) == nil }) {
		t.Fatal("the mark check never reached the promoted replica")
	}
	if spent, pending := spentOf(t, replica.Client(), "tg", team); spent != want || pending != 0 {
		t.Fatalf("spent %d pending %d, want %d", spent, pending, want)
	}
	t.Logf("%d requests acknowledged after the replica's link was cut, before the master refused writes; %d writes replayed", accepted, s.LostWrites())
}
