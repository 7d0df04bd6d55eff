package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizers of o200k_base and cl100k_base, written by hand. The
// encodings split text with a regular expression before BPE; tiktoken-go
// runs it on regexp2, a backtracking engine, which is most of the cost of
// a count. These scanners find the same pieces in one pass: at each
// position they try the pattern's alternatives in order, each resolved as
// the regex engine resolves it (greedy, backtracking where the classes
// overlap), with the same Unicode classes (Go's tables, as regexp2's; \s
// is unicode.IsSpace, as regexp2's). A corpus test and a fuzz target hold
// them to tiktoken-go's pieces.
//
// o200k_base:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// cl100k_base:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+

// Rune classes, as bits.
const (
	cL   = 1 << iota // \p{L}
	cN               // \p{N}
	cS               // \s (unicode.IsSpace)
	cUp              // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLow             // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNL              // \r or \n
)

// cPre is what [^\r\n\p{L}\p{N}] excludes; cP what [^\s\p{L}\p{N}] does.
const (
	cPreNot = cL | cN | cNL
	cPNot   = cL | cN | cS
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := range rune(utf8.RuneSelf) {
		asciiClass[r] = classify(r)
	}
}

func classify(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c |= cL
		if unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo) {
			c |= cUp
		}
		if unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo) {
			c |= cLow
		}
	case unicode.IsMark(r):
		c |= cUp | cLow
	case unicode.IsNumber(r):
		c |= cN
	case unicode.IsSpace(r):
		c |= cS
		if r == '\r' || r == '\n' {
			c |= cNL
		}
	}
	return c
}

// scanner walks text rune by rune; text is valid UTF-8.
type scanner struct{ s string }

// at returns the rune at byte i, its class and its size; size 0 at the end.
func (sc scanner) at(i int) (rune, uint8, int) {
	if i >= len(sc.s) {
		return 0, 0, 0
	}
	if b := sc.s[i]; b < utf8.RuneSelf {
		return rune(b), asciiClass[b], 1
	}
	r, size := utf8.DecodeRuneInString(sc.s[i:])
	return r, classify(r), size
}

// run returns the end of the run of runes from i whose class has a bit of
// want, at most max runes (max < 0: no bound), and how many runes it has.
func (sc scanner) run(i int, want uint8, max int) (end, n int) {
	for n != max {
		_, c, size := sc.at(i)
		if size == 0 || c&want == 0 {
			break
		}
		i += size
		n++
	}
	return i, n
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or -1.
func (sc scanner) contraction(i int) int {
	s := sc.s
	if i >= len(s) || s[i] != '\'' || i+1 >= len(s) {
		return -1
	}
	lower := func(b byte) byte {
		if 'A' <= b && b <= 'Z' {
			return b + 'a' - 'A'
		}
		return b
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	return -1
}

// suffix takes an optional contraction at i.
func (sc scanner) suffix(i int) int {
	if e := sc.contraction(i); e >= 0 {
		return e
	}
	return i
}

// punct matches " ?[^\s\p{L}\p{N}]+" then a run of trail at i, or -1.
func (sc scanner) punct(i int, slash bool) int {
	j := i
	if j < len(sc.s) && sc.s[j] == ' ' {
		if _, c, size := sc.at(j + 1); size > 0 && c&cPNot == 0 {
			j++
		}
	}
	_, c, size := sc.at(j)
	if size == 0 || c&cPNot != 0 {
		return -1
	}
	for {
		_, c, size := sc.at(j)
		if size == 0 || c&cPNot != 0 {
			break
		}
		j += size
	}
	for j < len(sc.s) && (sc.s[j] == '\r' || sc.s[j] == '\n' || slash && sc.s[j] == '/') {
		j++
	}
	return j
}

// space matches \s*[\r\n]+ | \s+(?!\S) | \s+ at i, or -1.
func (sc scanner) space(i int) int {
	lastNL, runes, prev := -1, 0, i
	j := i
	for {
		r, c, size := sc.at(j)
		if size == 0 || c&cS == 0 {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = j
		}
		prev = j
		j += size
		runes++
	}
	switch {
	case runes == 0:
		return -1
	case lastNL >= 0: // \s*[\r\n]+ backs off to the last line break
		return lastNL + 1
	case j == len(sc.s) || runes == 1: // \s+(?!\S) at the end; or \s+
		return j
	}
	return prev // \s+(?!\S): all but the last space, which goes with what follows
}

// nextO200k returns the end of the o200k_base piece starting at i < len(s).
func (sc scanner) nextO200k(i int) int {
	_, c, size := sc.at(i)
	pre := c&cPreNot == 0
	// Alternative 1: [pre]? U* L+ suffix?, then 2: [pre]? U+ L* suffix?.
	if pre {
		if e := sc.upLow(i + size); e >= 0 {
			return e
		}
	}
	if e := sc.upLow(i); e >= 0 {
		return e
	}
	if pre {
		if e := sc.upThenLow(i + size); e >= 0 {
			return e
		}
	}
	if e := sc.upThenLow(i); e >= 0 {
		return e
	}
	return sc.rest(i, c, size, true)
}

// rest is the alternatives both patterns end with, tried at i (whose rune
// has class c and size): \p{N}{1,3}, then punctuation (slash: o200k's
// trailing [\r\n/]*, else [\r\n]*), then white space.
func (sc scanner) rest(i int, c uint8, size int, slash bool) int {
	if c&cN != 0 {
		e, _ := sc.run(i, cN, 3)
		return e
	}
	if e := sc.punct(i, slash); e >= 0 {
		return e
	}
	if e := sc.space(i); e >= 0 {
		return e
	}
	return i + size // unreachable: every rune is matched by some alternative
}

// upLow matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// and a contraction at j, or -1: the upper run is greedy and gives back
// runes until the lower run can start.
func (sc scanner) upLow(j int) int {
	lastLow := -1 // the last rune of the upper run that is lower too
	k := j
	for {
		_, c, size := sc.at(k)
		if size == 0 || c&cUp == 0 {
			break
		}
		if c&cLow != 0 {
			lastLow = k
		}
		k += size
	}
	if _, c, size := sc.at(k); size > 0 && c&cLow != 0 {
		e, _ := sc.run(k, cLow, -1)
		return sc.suffix(e)
	}
	if lastLow < 0 {
		return -1
	}
	e, _ := sc.run(lastLow, cLow, -1)
	return sc.suffix(e)
}

// upThenLow matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// and a contraction at j, or -1.
func (sc scanner) upThenLow(j int) int {
	k, n := sc.run(j, cUp, -1)
	if n == 0 {
		return -1
	}
	e, _ := sc.run(k, cLow, -1)
	return sc.suffix(e)
}

// nextCl100k returns the end of the cl100k_base piece starting at i < len(s).
func (sc scanner) nextCl100k(i int) int {
	if e := sc.contraction(i); e >= 0 {
		return e
	}
	_, c, size := sc.at(i)
	if c&cPreNot == 0 {
		if _, c2, size2 := sc.at(i + size); size2 > 0 && c2&cL != 0 {
			e, _ := sc.run(i+size, cL, -1)
			return e
		}
	}
	if c&cL != 0 {
		e, _ := sc.run(i, cL, -1)
		return e
	}
	return sc.rest(i, c, size, false)
}
