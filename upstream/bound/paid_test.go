package bound_test

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream/bound"
)

func TestPaidUnits(t *testing.T) {
	q, h, j, b := bound.Units{Query: "limit"}, bound.Units{Header: "X-Max-Results"}, bound.Units{JSON: "max_results"}, bound.Units{BodyBytes: true}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	cases := []struct {
		name   string
		u      bound.Units
		query  string
		header http.Header
		body   string
		want   int64
		err    string // in the message; "" for none
	}{
		{"query", q, "q=paris&limit=7", nil, "", 7, ""},
		{"query at max", q, "limit=10", nil, "", 10, ""},
		{"query zero", q, "limit=0", nil, "", 0, ""},
		{"query past max", q, "limit=11", nil, "", 0, "limit is 11; this route takes at most 10"},
		{"query missing", q, "q=paris", nil, "", 0, "limit is missing"},
		{"query empty", q, "limit=", nil, "", 0, "limit is missing"},
		{"query twice", q, "limit=1&limit=500", nil, "", 0, "limit is sent 2 times"},
		{"query in another case", q, "Limit=500", nil, "", 0, "limit is spelt Limit"},
		{"query in two cases", q, "limit=1&LIMIT=500", nil, "", 0, "send it once"},
		{"query encoded name", q, "li%6Dit=3", nil, "", 3, ""},
		{"query negative", q, "limit=-1", nil, "", 0, "non-negative integer"},
		{"query plus sign", q, "limit=%2B5", nil, "", 0, "non-negative integer"},
		{"query leading zero", q, "limit=05", nil, "", 0, "non-negative integer"},
		{"query fraction", q, "limit=1.5", nil, "", 0, "non-negative integer"},
		{"query exponent", q, "limit=1e1", nil, "", 0, "non-negative integer"},
		{"query huge", q, "limit=99999999999999999999", nil, "", 0, "non-negative integer"},
		{"query semicolon", q, "limit=1;limit=500", nil, "", 0, "does not parse"},
		{"query also in a form body", q, "limit=1", form, "limit=500", 0, "in the body too"},
		{"query and an unrelated form", q, "limit=1", form, "q=x", 1, ""},
		{"query also in a multipart body", q, "limit=1", http.Header{"Content-Type": {"multipart/form-data; boundary=b"}},
			"--b\r\nContent-Disposition: form-data; name=\"LIMIT\"\r\n\r\n500\r\n--b--\r\n", 0, "in the body too"},
		{"header", h, "", http.Header{"X-Max-Results": {"4"}}, "", 4, ""},
		{"header twice", h, "", http.Header{"X-Max-Results": {"4", "400"}}, "", 0, "sent 2 times"},
		{"header list", h, "", http.Header{"X-Max-Results": {"4, 400"}}, "", 0, "non-negative integer"},
		{"header missing", h, "", http.Header{}, "", 0, "X-Max-Results is missing"},
		{"json", j, "", nil, `{"q":"x","max_results":9}`, 9, ""},
		{"json twice", j, "", nil, `{"max_results":1,"max_results":500}`, 0, "duplicate"},
		{"json in another case", j, "", nil, `{"max_results":1,"Max_Results":500}`, 0, "spelt Max_Results"},
		{"json string", j, "", nil, `{"max_results":"9"}`, 0, "must be an integer"},
		{"json float", j, "", nil, `{"max_results":9.0}`, 0, "non-negative integer"},
		{"json missing", j, "", nil, `{"q":"x"}`, 0, "max_results is missing"},
		{"json not an object", j, "", nil, `[1]`, 0, "one JSON object"},
		{"json null", j, "", nil, `null`, 0, "one JSON object"},
		{"json trailing", j, "", nil, `{"max_results":1} {"max_results":500}`, 0, "one JSON object"},
		{"body bytes", b, "", nil, "hello", 5, ""},
		{"body bytes past max", b, "", nil, "hello world", 0, "the body is 11 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.header == nil {
				c.header = http.Header{}
			}
			got, err := bound.PaidUnits(c.u, c.query, c.header, []byte(c.body), 10)
			switch {
			case c.err == "" && (err != nil || got != c.want):
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("got %d, %v; want an error with %q", got, err, c.err)
			}
			var re *bound.RequestError
			if err != nil && !errors.As(err, &re) {
				t.Fatalf("%T is not a *RequestError: the client would get a 500", err)
			}
		})
	}
}

func TestPaidBilledRoundsUp(t *testing.T) {
	for in, want := range map[string]int64{"3": 3, "2.5": 3, "2.0": 2, "0.0001": 1, "0": 0, " 7 ": 7, "12.000": 12} {
		if got, ok := bound.PaidBilled(in); !ok || got != want {
			t.Errorf("PaidBilled(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "-1", "1e3", "abc", ".5", "1.2.3", "NaN", "+4", "9999999999999"} {
		if got, ok := bound.PaidBilled(in); ok {
			t.Errorf("PaidBilled(%q) = %d, want it unread (charged the reservation)", in, got)
		}
	}
}

// FuzzPaidUnitsQuery: for any query string accepted, every way a server
// may read the bound — the first value, the last, any letter case — reads
// at most what was reserved.
func FuzzPaidUnitsQuery(f *testing.F) {
	for _, s := range []string{"limit=3", "limit=1&limit=9", "Limit=3", "li%6Dit=4", "limit=3&x=1", "limit=%33", "limit=3;x", "limit=+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		n, err := bound.PaidUnits(bound.Units{Query: "limit"}, query, http.Header{}, nil, 10)
		if err != nil {
			return
		}
		if n < 0 || n > 10 {
			t.Fatalf("%q: bound %d outside [0, 10]", query, n)
		}
		q, perr := url.ParseQuery(query)
		if perr != nil {
			t.Fatalf("%q accepted, but does not parse: %v", query, perr)
		}
		for k, vs := range q {
			if !strings.EqualFold(k, "limit") {
				continue
			}
			for _, v := range vs {
				// Lenient readers: a sign, leading zeros, spaces.
				if got, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || got > float64(n) {
					t.Fatalf("%q accepted with bound %d; a server may read %s=%q", query, n, k, v)
				}
			}
		}
	})
}
