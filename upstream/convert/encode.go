package convert

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// marshal encodes v as encoding/json does without HTML escaping (text
// stays byte for byte), and to the same bytes: map keys sorted, floats as
// ES6 numbers, raw messages compacted, U+2028 and U+2029 and bytes that
// are not UTF-8 escaped. The bodies and events a translation writes are
// maps, slices, strings and numbers; written here without reflection,
// they cost a fraction of what encoding/json spends on them (a translated
// request's largest cost). Any other type is left to encoding/json.
func marshal(v any) ([]byte, error) {
	return appendJSON(make([]byte, 0, 512), v)
}

var errUnsupported = errors.New("convert: json: unsupported value")

func appendJSON(b []byte, v any) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		return appendFloat(b, v)
	case json.RawMessage:
		if v == nil {
			return append(b, "null"...), nil
		}
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, v); err != nil {
			return b, err
		}
		return buf.Bytes(), nil
	case map[string]any:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendString(b, k), ':')
			if b, err = appendJSON(b, v[k]); err != nil {
				return b, err
			}
		}
		return append(b, '}'), nil
	case map[string]string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '{')
		for i, k := range sortedKeys(v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(append(appendString(b, k), ':'), v[k])
		}
		return append(b, '}'), nil
	case []any:
		return appendList(b, v)
	case []map[string]any:
		return appendList(b, v)
	case []string:
		return appendList(b, v)
	}
	// Anything else, as encoding/json writes it.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}

// appendList appends a slice, null where it is nil, as encoding/json does.
func appendList[T any](b []byte, list []T) ([]byte, error) {
	if list == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	var err error
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendJSON(b, any(list[i])); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func sortedKeys[V any](m map[string]V) []string {
	var buf [16]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendFloat writes f as encoding/json does: as ES6 converts a number
// to a string (%g's way, but with other cutoffs and exponents unpadded).
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, errUnsupported
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-09 is e-9
		b = b[:n-1]
	}
	return b, nil
}

// appendString writes s quoted as encoding/json does without HTML
// escaping: '"', '\\' and control characters escaped (\b, \f, \n, \r, \t
// short), U+2028 and U+2029 too, and each byte that is not UTF-8 as
// \ufffd. Plain bytes are skipped eight at a time.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && !special8(binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))) {
			i += 8
		}
		for i < len(s) && s[i] >= 0x20 && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\' {
			i++
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
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
	return append(append(b, s[start:]...), '"')
}

const hex = "0123456789abcdef"

// special8 reports whether a byte of x may need escaping: a control
// character, '"', '\\' or a byte of a multi-byte character. (It may say
// so of a word that has none, never the other way: the byte loop
// decides.)
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return (x-0x20*ones|zero(x^'"'*ones)|zero(x^'\\'*ones)|x)&highs != 0
}
