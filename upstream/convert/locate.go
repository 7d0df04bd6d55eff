package convert

import (
	"strings"

	"github.com/go-json-experiment/json"
)

// An answer's usage is among its last top-level members, after the
// choices or content a reading from the start must pass over: a chat
// answer of 566 bytes cost json/v2 some 30,000 instructions to read whole,
// a seventh of the gateway's own work on a request (BENCHMARKS.md,
// "one reading"). An answer is the upstream's text — what a client sent is
// inside its strings, escaped, where no walk can take it for a member — so
// its usage is found by walking its top level back from the end, and only
// the usage object itself is read by ReadUsage, strictly.

// lastMember is where the value of the last top-level member of s named
// key (valid UTF-8) starts and ends (s[from:to]), or -1, -1. s is not
// validated: the walk goes back from the end, member by member, over the
// top level's values, reads any bytes without panicking, and where s is
// valid JSON finds the member encoding/json takes, the last of its name
// (FuzzLastMember).
func lastMember(s, key string) (from, to int) {
	open := ws(s, 0)
	i := wsBack(s, len(s))
	if open >= len(s) || s[open] != '{' || i <= open+1 || s[i-1] != '}' {
		return -1, -1
	}
	lo := open + 1 // nothing of a member lies before it
	for i--; ; {
		end := wsBack(s, i)
		if end <= lo {
			return -1, -1 // the first member passed, or an empty object
		}
		start := valueStart(s, lo, end)
		c := wsBack(s, max(start, lo))
		if start < lo || c <= lo || s[c-1] != ':' {
			return -1, -1
		}
		k := wsBack(s, c-1)
		if k <= lo || s[k-1] != '"' {
			return -1, -1
		}
		q := quoteBefore(s, lo, k-1)
		if q < 0 {
			return -1, -1
		}
		if name := s[q+1 : k-1]; name == key || strings.IndexByte(name, '\\') >= 0 && unquote(s[q:k]) == key {
			return start, end
		}
		p := wsBack(s, q)
		if p <= lo {
			return -1, -1 // the first member: key is not one
		}
		if s[p-1] != ',' {
			return -1, -1
		}
		i = p - 1
	}
}

// unquote is a JSON string's value, or "" where it is not one.
func unquote(q string) string {
	var s string
	if json.Unmarshal([]byte(q), &s) != nil {
		return ""
	}
	return s
}

// ws is where the white space from i ends.
func ws(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// wsBack is where the white space that ends at i starts.
func wsBack(s string, i int) int {
	for i > 0 && (s[i-1] == ' ' || s[i-1] == '\n' || s[i-1] == '\r' || s[i-1] == '\t') {
		i--
	}
	return i
}

// valueStart is where the value that ends at end (exclusive) starts, no
// earlier than lo; below lo where it has no start there.
func valueStart(s string, lo, end int) int {
	switch s[end-1] {
	case '"':
		return quoteBefore(s, lo, end-1)
	case '}', ']':
		depth := 0
		for j := end - 1; j >= lo; j-- {
			switch s[j] {
			case '"':
				if j = quoteBefore(s, lo, j); j < 0 {
					return -1
				}
			case '}', ']':
				depth++
			case '{', '[':
				if depth--; depth == 0 {
					return j
				}
			}
		}
		return -1
	}
	j := end - 1
	for j > lo {
		switch s[j-1] {
		case ',', ':', '[', '{', ' ', '\n', '\r', '\t':
			return j
		}
		j--
	}
	return j
}

// quoteBefore is the index of the quote that opens the string closed by
// the quote at q, no earlier than lo, or -1: a quote is a string's
// delimiter where an even run of backslashes precedes it (none, in JSON,
// outside strings).
func quoteBefore(s string, lo, q int) int {
	for {
		j := strings.LastIndexByte(s[lo:q], '"')
		if j < 0 {
			return -1
		}
		j += lo
		k := j
		for k > lo && s[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		q = j
	}
}
