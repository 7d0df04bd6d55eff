package policy

import (
	"strconv"
	"time"

	"github.com/tollgate-dev/tollgate/budget"
)

// AlertID names one threshold of one budget's period.
func AlertID(l budget.Limit, period string, threshold int64) string {
	return l.Bucket + "|" + period + "|" + strconv.FormatInt(threshold, 10)
}

// AlertClaim is the claim (budget.Claims, in l's partition) the instance
// that sends alert id takes first: the alert goes out once, whichever
// instance sees the threshold crossed.
func AlertClaim(id string) string { return "alert:" + id }

// AlertFired is the counter (budget.Claims.Count, in l's partition, for
// AlertClaimTTL) of how many times alert id went out this period: more
// than once only after a reset re-armed it. The finance page reads it.
func AlertFired(id string) string { return "alert-fired:" + id }

// AlertClaimTTL is how long an alert's claim must stand at now: until
// budget l's period ends, and a day more for clocks that disagree.
func AlertClaimTTL(l budget.Limit, now time.Time) time.Duration {
	return budget.PeriodEnd(l.Period, now, l.Location).Sub(now) + 24*time.Hour
}

// BlockedAlertID names budget l's "blocked" alert in period: a request
// refused for want of room that no output cap made fit. It goes out once a
// period, like a threshold's (threshold 0 is none's).
func BlockedAlertID(l budget.Limit, period string) string { return AlertID(l, period, 0) }

// AlertClaims are the claims of budget l's thresholds and of its blocked
// alert in period: resetting the period gives them back, so its alerts
// fire again.
func AlertClaims(l budget.Limit, period string, thresholds []int64) []string {
	out := make([]string, 0, len(thresholds)+1)
	for _, th := range thresholds {
		out = append(out, AlertClaim(AlertID(l, period, th)))
	}
	return append(out, AlertClaim(BlockedAlertID(l, period)))
}
