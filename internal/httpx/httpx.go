// Package httpx holds the small HTTP helpers the request path shares:
// headers set without an allocation each, and bodies read into one buffer
// of the size they declare. Every request runs through them, where
// http.Header.Set and io.ReadAll cost a slice per header and a buffer
// regrown three or four times per body. It imports nothing of the gateway.
package httpx

import (
	"io"
	"net/http"
)

// Headers sets headers whose values share one backing array. Keys must be
// in canonical form (as http.CanonicalHeaderKey writes them): they are
// stored as given. Each value is its own full slice (length = capacity),
// so an Add to one header later reallocates it and never writes into its
// neighbour's.
type Headers struct {
	h    http.Header
	vals []string
}

// NewHeaders returns a setter for h with room for n values in one
// allocation (more are allowed: they take another).
func NewHeaders(h http.Header, n int) Headers {
	return Headers{h: h, vals: make([]string, 0, n)}
}

// Set sets key, canonical, to the single value v.
func (s *Headers) Set(key, v string) {
	s.vals = append(s.vals, v)
	n := len(s.vals)
	s.h[key] = s.vals[n-1 : n : n]
}

// Get is h.Get(key) for a key in canonical form, read without
// canonicalising it again: http.Header.Get's CanonicalMIMEHeaderKey cost
// some 400 instructions a call, a few calls a request.
func Get(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ReadAll reads r to its end, at most max+1 bytes of it: a result longer
// than max says the body was larger. size is what the body declares
// (Content-Length; negative where unknown): a body of known size is read
// into one buffer of exactly that size, not grown from 512 bytes.
func ReadAll(r io.Reader, size, max int64) ([]byte, error) {
	if size < 0 || size > max {
		return io.ReadAll(io.LimitReader(r, max+1))
	}
	// One byte over the size: the read that finds the end then has room,
	// and a body longer than it declared still stops at max+1.
	b := make([]byte, 0, size+1)
	for {
		if int64(len(b)) > max {
			return b, nil
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than declared: grow
		}
		room := b[len(b):cap(b)]
		if left := max + 1 - int64(len(b)); int64(len(room)) > left {
			room = room[:left]
		}
		n, err := r.Read(room)
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}
