// Package jsonx holds the JSON writing the gateway's fast paths share
// with encoding/json and log/slog, to the same bytes: strings escaped as
// they escape them, and encoding/json without HTML escaping.
package jsonx

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
	"unsafe"
)

// Style is how control characters with a short escape other than \n, \r
// and \t are written: encoding/json writes \b and \f, log/slog \u0008 and
// \u000c.
type Style bool

const (
	JSON Style = true  // encoding/json's escapes
	Slog Style = false // log/slog's JSONHandler's escapes
)

// AppendEscaped appends s escaped as the inside of a JSON string, without
// the quotes: '"', '\\' and control characters, U+2028 and U+2029, and each
// byte that is not UTF-8 as \ufffd; HTML characters are left as they are.
// Plain bytes are skipped eight at a time.
func AppendEscaped(b []byte, s string, style Style) []byte {
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && !special8(binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))) {
			i += 8
		}
		// The last bytes, fewer than eight, are read as the last eight of
		// s where s has eight: most strings end plain.
		if i < len(s) && len(s)-i < 8 && len(s) >= 8 && !special8(binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[len(s)-8:]), 8))) {
			i = len(s)
		}
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b' && style == JSON:
				b = append(b, '\\', 'b')
			case c == '\f' && style == JSON:
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// Marshal is json.Marshal without HTML escaping, so text stays byte for
// byte what it was.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// special8 reports whether any byte of x is not plain: a control
// character, '"', '\\' or a byte of a multi-byte character. (It may say
// so of a word that has none, never the other way: the byte loop decides.)
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return (x-0x20*ones|zero(x^'"'*ones)|zero(x^'\\'*ones)|x)&highs != 0
}

const hex = "0123456789abcdef"

// plain are the bytes written as they are: ASCII but for control
// characters, '"' and '\\'.
var plain = func() (p [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		p[c] = c != '"' && c != '\\'
	}
	return p
}()
