// Package uid makes the identifiers the gateway hands out per request:
// the request id and the reservation id.
//
// crypto/rand.Text drew them: some 900 instructions each, a call into the
// kernel's generator behind a lock, twice a request. What they need is to
// be unique — across the instances sharing a store and across restarts —
// not to be secret: no one is authorised by knowing one. The runtime's
// per-thread ChaCha8 generator (math/rand/v2's top-level functions),
// seeded from the operating system, gives as many random bits as
// crypto/rand.Text's for a fraction of the cost.
package uid

import "math/rand/v2"

// alphabet is crypto/rand.Text's: base32 (RFC 4648) upper case.
const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

// Text is n random characters of the alphabet, five random bits each.
// Text(26), crypto/rand.Text's length, holds 130 bits.
func Text(n int) string { return Prefixed("", n) }

// Prefixed is prefix followed by Text(n), made in one allocation.
func Prefixed(prefix string, n int) string {
	var buf [64]byte
	var b []byte
	if len(prefix)+n <= len(buf) {
		b = buf[:len(prefix)+n]
	} else {
		b = make([]byte, len(prefix)+n)
	}
	text := b[copy(b, prefix):]
	for len(text) > 0 { // 12 characters a draw: 60 of its 64 bits
		w := rand.Uint64()
		for i := range text[:min(12, len(text))] {
			text[i] = alphabet[w&31]
			w >>= 5
		}
		text = text[min(12, len(text)):]
	}
	return string(b)
}
