package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/tollgate-dev/tollgate/internal/jsonx"
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
		return appendMap(b, v)
	case map[string]string:
		return appendMap(b, v)
	case []any:
		return appendList(b, v)
	case []map[string]any:
		return appendList(b, v)
	case []string:
		return appendList(b, v)
	}
	// Anything else, as encoding/json writes it.
	out, err := jsonx.Marshal(v)
	return append(b, out...), err
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

// appendMap appends a map, its keys sorted, null where it is nil, as
// encoding/json does.
func appendMap[V any](b []byte, m map[string]V) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '{')
	var err error
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendJSON(append(appendString(b, k), ':'), any(m[k])); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
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
// escaping.
func appendString(b []byte, s string) []byte {
	return append(jsonx.AppendEscaped(append(b, '"'), s, jsonx.JSON), '"')
}
