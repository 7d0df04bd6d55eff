package budget

// RecentIDs remembers the last RecentCap reservation ids a store settled,
// so that settling one again answers AlreadySettled and reserving it again
// ErrDuplicateReservation without keeping a record per request for long:
// memory stays bounded however many requests a store settles. The zero
// value is ready to use; it is not safe for concurrent use.
type RecentIDs struct {
	ids  map[string]struct{}
	ring []string
	next int
}

// RecentCap is how many settled ids a RecentIDs remembers.
const RecentCap = 4096

// Add remembers id, forgetting the oldest past RecentCap.
func (r *RecentIDs) Add(id string) {
	if r.ids == nil {
		r.ids, r.ring = make(map[string]struct{}, RecentCap), make([]string, RecentCap)
	}
	delete(r.ids, r.ring[r.next])
	r.ring[r.next], r.next = id, (r.next+1)%RecentCap
	r.ids[id] = struct{}{}
}

// Has tells whether id is among the remembered.
func (r *RecentIDs) Has(id string) bool {
	_, ok := r.ids[id]
	return ok
}
