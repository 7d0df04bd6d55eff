package budget

import "time"

// Entry is one settlement as the ledger records it: who, what, how much, and
// whether the usage was reported by the upstream or counted by the gateway.
// Its JSON form is the ledger's line format.
type Entry struct {
	Time          time.Time `json:"time"`
	RequestID     string    `json:"request_id"`
	ReservationID string    `json:"reservation_id"`
	Org           string    `json:"org"`
	Team          string    `json:"team"`
	Key           string    `json:"key"` // the key's id, never the key
	User          string    `json:"user,omitempty"`
	Route         string    `json:"route"`
	Model         string    `json:"model"` // as the client named it: a model or an alias
	// ServedModel is the model that served it, where it is not Model (an
	// alias's deployment).
	ServedModel string `json:"served_model,omitempty"`
	Upstream    string `json:"upstream,omitempty"`
	Usage       Usage  `json:"usage"` // Usage.Estimated: the gateway counted it
	// Units are a paid route's units charged: what the API reported
	// (rounded up), or the most the request allowed.
	Units    int64 `json:"units,omitempty"`
	Cost     Money `json:"usd_micros"`
	Reserved Money `json:"reserved_usd_micros"`
	// ReservedTokens is the token bound reserved: what a budget counted in
	// tokens was charged if the lease expired unsettled.
	ReservedTokens int64  `json:"reserved_tokens,omitempty"`
	Served         bool   `json:"served"`
	Outcome        string `json:"outcome"`
	Degraded       string `json:"degraded,omitempty"`
	Bypass         string `json:"bypass,omitempty"` // who skipped the limits, if anyone
	// Settlement is how the cost was settled: "reported" (the upstream's
	// usage), "drained" (the same, read after the client left), or
	// "reservation" (no usable usage: the whole reservation); empty when
	// nothing reached an upstream or it answered with a failure it does
	// not bill.
	Settlement string `json:"settlement,omitempty"`
	// Abandoned is why the gateway stopped reading the upstream's answer
	// before its end, if it did: first_byte_timeout, timeout,
	// idle_timeout, connection, overrun, shutdown. Such an attempt may be
	// billed, and is charged its reservation.
	Abandoned string `json:"abandoned,omitempty"`
}

// ID identifies the entry in the ledger: its reservation id, or for spend
// that had none its request id. The durable ledger stores each id once.
func (e *Entry) ID() string {
	switch {
	case e.Outcome == Corrected.String():
		return e.ReservationID + "/corrected" // beside the expired entry it corrects
	case e.ReservationID != "":
		return e.ReservationID
	}
	return "req-" + e.RequestID
}

// CorrectionOf is the ledger entry of a late settlement that corrected a
// sweep (Outcome Corrected): the ledger already holds the expired entry,
// charged at the reservation, so this one carries the usage and the
// difference (actual - reserved, a refund when negative). Summed, the two
// are what the upstream reported.
func CorrectionOf(settled Entry) Entry {
	e := settled
	e.Outcome = Corrected.String()
	e.Cost = settled.Cost - settled.Reserved
	return e
}
