package policy

import (
	"strconv"

	"github.com/tollgate-dev/tollgate/budget"
)

// AlertID names one threshold of one budget's period.
func AlertID(l budget.Limit, period string, threshold int64) string {
	return l.Bucket + "|" + period + "|" + strconv.FormatInt(threshold, 10)
}

// AlertClaim is the one-unit budget in the store an alert is claimed from.
func AlertClaim(l budget.Limit, id string) budget.Limit {
	return budget.Limit{Bucket: "alert:" + id, Name: "alert", Partition: l.Partition, Scope: l.Scope, Kind: budget.Ceiling,
		Unit: budget.Requests, Amount: 1, Period: l.Period, Location: l.Location}
}

// AlertClaims are the store's claims of budget l's thresholds in period:
// resetting the period resets them too, so its alerts fire again.
func AlertClaims(l budget.Limit, period string, thresholds []int64) []budget.Limit {
	out := make([]budget.Limit, len(thresholds))
	for i, th := range thresholds {
		out[i] = AlertClaim(l, AlertID(l, period, th))
	}
	return out
}
