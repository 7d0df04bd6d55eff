package upstream

import (
	"encoding/binary"
	"iter"
	"math/bits"
	"strings"
	"unsafe"
)

// The gateway reads every request body and every JSON answer, and what
// it reads of them is a few top-level fields, the messages and the usage.
// gjson did that in four passes over the body (validate, walk the names,
// walk the members, walk the messages), each a recursive descent at some
// twenty instructions a byte: a tenth of the gateway's own work per
// request. The scanner here validates in one flat loop, eight bytes of a
// string at a time, and then walks the validated text with a skip that
// needs no checks.

// maxDepth is encoding/json's limit on nesting: a deeper body is not
// valid to it.
const maxDepth = 10000

// validJSON is json.Valid(b) (FuzzValidJSON compares them).
func validJSON(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	ok, _ := validFind(unsafe.String(&b[0], len(b)), "")
	return ok
}

// validFind is validJSON on text that also finds, on the way, the value of the
// first top-level member named key (as get would): at is its offset, or
// -1.
func validFind(s, key string) (ok bool, at int) { return validScan(s, key, nil) }

// validTop is validJSON on text that also appends to top, on the way, the
// offsets of each top-level member's key and value where s is an object
// (what members would yield, without walking the body again). Its
// members' key is left empty.
func validTop(s string, top *[]member) bool {
	ok, _ := validScan(s, "", top)
	return ok
}

// validScan is validFind and validTop: top may be nil.
func validScan(s, key string, top *[]member) (ok bool, at int) {
	at = -1
	// objects: bit d is set where the container at depth d is an object.
	var objects [maxDepth/64 + 1]uint64
	depth := 0
	i := ws(s, 0)
	for {
		// A value starts at i.
		if i >= len(s) {
			return false, -1
		}
		switch c := s[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return false, -1
			}
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			if i = ws(s, i+1); i < len(s) && s[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				depth--
				i++
				break // empty: the value ends here
			}
			if c == '{' {
				if i = readMember(s, i, depth, key, &at, top); i < 0 {
					return false, -1
				}
			}
			continue // its first value
		case '"':
			if i = stringEnd(s, i+1); i < 0 {
				return false, -1
			}
		case 't':
			if !strings.HasPrefix(s[i:], "true") {
				return false, -1
			}
			i += 4
		case 'f':
			if !strings.HasPrefix(s[i:], "false") {
				return false, -1
			}
			i += 5
		case 'n':
			if !strings.HasPrefix(s[i:], "null") {
				return false, -1
			}
			i += 4
		default:
			if i = numberEnd(s, i); i < 0 {
				return false, -1
			}
		}
		// A value ended at i: close what it ends, up to the next value.
		for {
			if depth == 1 && top != nil && len(*top) > 0 && (*top)[len(*top)-1].to < 0 {
				(*top)[len(*top)-1].to = i // a top-level member's value
			}
			i = ws(s, i)
			if depth == 0 {
				if i != len(s) {
					return false, -1
				}
				return true, at
			}
			if i >= len(s) {
				return false, -1
			}
			d := depth - 1
			inObject := objects[d/64]&(1<<(d%64)) != 0
			c := s[i]
			if c == ',' {
				i = ws(s, i+1)
				if inObject {
					if i = readMember(s, i, depth, key, &at, top); i < 0 {
						return false, -1
					}
				}
				break
			}
			if c != '}' && c != ']' || (c == '}') != inObject {
				return false, -1
			}
			depth--
			i++
		}
	}
}

// lastMember is where the value of the last top-level member of s named
// key (valid UTF-8) starts and ends (s[from:to]), or -1, -1. s is not
// validated: the walk goes back from the end, member by member, over the
// top level's values —
// an answer's usage is among its last members, after the choices or
// content a walk from the start must pass over —, reads any bytes without
// panicking, and where s is valid JSON finds the member encoding/json
// takes, the last of its name (FuzzLastMember).
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
		if name := s[q+1 : k-1]; name == key || strings.IndexByte(name, '\\') >= 0 && keyName(jnode{raw: s[q:k]}) == key {
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

// wsBack is where the whitespace that ends at i starts.
func wsBack(s string, i int) int {
	for i > 0 && s[i-1] <= ' ' && (s[i-1] == ' ' || s[i-1] == '\n' || s[i-1] == '\r' || s[i-1] == '\t') {
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

// readMember reads a member's key and colon from i, for validScan: where
// its value starts, or -1. A member of the top level (depth 1) is noted:
// at where it is the first named key, appended to top (its value's end
// left at -1, for validScan to set).
func readMember(s string, i, depth int, key string, at *int, top *[]member) int {
	k := i
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	e := stringEnd(s, i+1)
	if e < 0 {
		return -1
	}
	if i = ws(s, e); i >= len(s) || s[i] != ':' {
		return -1
	}
	i = ws(s, i+1)
	if depth == 1 {
		if *at < 0 && key != "" && keyName(jnode{raw: s[k:e]}) == key {
			*at = i
		}
		if top != nil {
			*top = append(*top, member{keyFrom: k, keyTo: e, from: i, to: -1})
		}
	}
	return i
}

// ws is where the whitespace from i ends. (Most calls find none: one
// comparison says so, JSON's four spaces all being at most ' '.)
func ws(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 marks the bytes of x (little-endian) that are a quote, a
// backslash or a control character (below 0x20) with their high bit. A
// borrow can mark a byte above a marked one too, never one below: the
// lowest mark is exact, which is all a scan needs.
func special8(x uint64) uint64 {
	quote := x ^ (ones * '"')
	slash := x ^ (ones * '\\')
	has := (quote - ones) &^ quote
	has |= (slash - ones) &^ slash
	has |= (x - ones*0x20) &^ x
	return has & highs
}

// stringEnd reads a string's contents from i, just after its opening
// quote: the index after its closing quote, or -1 where the string is not
// valid JSON. Plain bytes are skipped eight at a time.
func stringEnd(s string, i int) int {
	for {
		for {
			if i+8 > len(s) {
				for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
					i++
				}
				break
			}
			if m := special8(binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))); m != 0 {
				i += bits.TrailingZeros64(m) / 8
				break
			}
			i += 8
		}
		if i >= len(s) {
			return -1
		}
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(s) {
				return -1
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) || !hex4(s[i+2:i+6]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

// quoteAfter is stringEnd for validated text, where only the closing quote
// is to be found: IndexByte finds quotes many bytes at a time, and one is
// escaped where an odd run of backslashes precedes it.
func quoteAfter(s string, i int) int {
	// Most strings are short (keys, roles, ids): their quote is in the
	// next eight bytes, found there without IndexByte's call.
	if i+8 <= len(s) {
		x := binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
		quote := x ^ (ones * '"')
		slash := x ^ (ones * '\\')
		q := (quote - ones) &^ quote & highs
		b := (slash - ones) &^ slash & highs
		// The lowest marks are exact (see special8): a quote before
		// any backslash closes the string.
		if q != 0 && (b == 0 || bits.TrailingZeros64(q) < bits.TrailingZeros64(b)) {
			return i + bits.TrailingZeros64(q)/8 + 1
		}
	}
	for {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			return len(s)
		}
		j += i
		k := j
		for k > i && s[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		i = j + 1
	}
}

func hex4(s string) bool {
	for i := range 4 {
		c := s[i]
		if (c < '0' || c > '9') && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	return true
}

// numberEnd reads a number from i: the index after it, or -1.
func numberEnd(s string, i int) int {
	if s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return -1
	case s[i] == '0':
		i++
	case '1' <= s[i] && s[i] <= '9':
		i = digits(s, i+1)
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		j := digits(s, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// A jnode is one value of validated JSON text, read in place: raw is its
// text, at where that starts in the text it was read from.
type jnode struct {
	raw string
	at  int
}

// root is the value of b, which validJSON accepted. It points into b: it is
// read while b is, and b is not changed meanwhile.
func root(b []byte) jnode {
	if len(b) == 0 {
		return jnode{}
	}
	s := unsafe.String(&b[0], len(b))
	from := ws(s, 0)
	to := len(s)
	for to > from && (s[to-1] == ' ' || s[to-1] == '\n' || s[to-1] == '\r' || s[to-1] == '\t') {
		to--
	}
	return jnode{s[from:to], from}
}

func (v jnode) is(c byte) bool { return len(v.raw) > 0 && v.raw[0] == c }

func (v jnode) isObject() bool { return v.is('{') }
func (v jnode) isArray() bool  { return v.is('[') }
func (v jnode) isString() bool { return v.is('"') }
func (v jnode) isNull() bool   { return v.is('n') }
func (v jnode) isNumber() bool {
	return len(v.raw) > 0 && (v.raw[0] == '-' || '0' <= v.raw[0] && v.raw[0] <= '9')
}

// members are an object's members: each key as written (quoted) and its
// value.
func (v jnode) members() iter.Seq2[jnode, jnode] {
	return func(yield func(k, val jnode) bool) {
		if !v.isObject() {
			return
		}
		s := v.raw
		for i := ws(s, 1); s[i] == '"'; {
			e := quoteAfter(s, i+1)
			k := jnode{s[i:e], v.at + i}
			i = ws(s, ws(s, e)+1) // past the colon
			e = skip(s, i)
			if !yield(k, jnode{s[i:e], v.at + i}) {
				return
			}
			if i = ws(s, e); s[i] == ',' {
				i = ws(s, i+1)
			}
		}
	}
}

// elements are an array's elements.
func (v jnode) elements() iter.Seq[jnode] {
	return func(yield func(jnode) bool) {
		if !v.isArray() {
			return
		}
		s := v.raw
		for i := ws(s, 1); s[i] != ']'; {
			e := skip(s, i)
			if !yield(jnode{s[i:e], v.at + i}) {
				return
			}
			if i = ws(s, e); s[i] == ',' {
				i = ws(s, i+1)
			}
		}
	}
}

// get is the value of an object's first member named key (as gjson's Get
// reads it), or the zero jnode.
func (v jnode) get(key string) jnode {
	for k, val := range v.members() {
		if keyName(k) == key {
			return val
		}
	}
	return jnode{}
}

// keyName is a member's name: its key unquoted.
func keyName(k jnode) string {
	name := k.raw[1 : len(k.raw)-1]
	if strings.IndexByte(name, '\\') >= 0 {
		name, _ = str(k)
	}
	return name
}

// text is v as gjson's String gives it: a string's value, "" for null or
// nothing, the JSON text of anything else.
func (v jnode) text() string {
	switch {
	case v.isString():
		s, _ := str(v)
		return s
	case v.isNull():
		return ""
	}
	return v.raw
}

// skip is the index after the value starting at s[i], in valid JSON.
func skip(s string, i int) int {
	switch s[i] {
	case '"':
		return quoteAfter(s, i+1)
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				i = quoteAfter(s, i+1) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(s)
	}
	for i < len(s) {
		switch s[i] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			return i
		}
		i++
	}
	return i
}
