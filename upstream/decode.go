package upstream

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// The chat messages are most of what a request's estimate decodes, and
// encoding/json decodes them by reflection after scanning them once more
// for validity: a fifth of the gateway's own instructions per request.
// The decoders here read the common shape of messages and content parts
// from the body, which ParseRequest has validated, and give up (ok false)
// on anything else — a duplicate or escaped key, a null where a string
// goes, a part with fields other than type and text —, where the caller
// decodes with encoding/json as before. So the result is encoding/json's
// by construction, which FuzzDecodeMessages checks.
//
// Their strings point into the body: they are counted, never kept.

// decodeMessages is json.Unmarshal(raw, &msgs) for messages that are
// objects with fields of the expected types.
func decodeMessages(raw []byte) ([]chatMessage, bool) { return decodeArray(raw, decodeMessage) }

// decodeArray is json.Unmarshal(raw, &out) for an array each of whose
// elements decode reads (ok false: encoding/json decides). The slice is
// one allocation of the right size: the first elements are decoded onto
// the stack, and only an array longer than that is counted first (a walk
// over every element, which a short array — most requests' — is spared).
func decodeArray[T any](raw []byte, decode func(jnode) (T, bool)) ([]T, bool) {
	v := root(raw)
	if !v.isArray() {
		return nil, false
	}
	var first [4]T
	n := 0
	var out []T
	for item := range v.elements() {
		e, ok := decode(item)
		if !ok {
			return nil, false
		}
		switch {
		case out != nil:
			out = append(out, e)
		case n < len(first):
			first[n] = e
			n++
		default: // a fifth: count them all
			count := 0
			for range v.elements() {
				count++
			}
			out = append(append(make([]T, 0, count), first[:n]...), e)
		}
	}
	if out == nil {
		out = append(make([]T, 0, n), first[:n]...)
	}
	return out, true
}

// messageFields are chatMessage's JSON names.
var messageFields = []string{"role", "name", "content", "tool_calls", "function_call", "tool_call_id", "refusal", "audio"}

func decodeMessage(v jnode) (m chatMessage, ok bool) {
	_, ok = readFields(v, messageFields, true, func(f int, val jnode) bool {
		ok := true
		switch messageFields[f] {
		case "role":
			m.Role, ok = str(val)
		case "name":
			m.Name, ok = str(val)
		case "tool_call_id":
			m.ToolCallID, ok = str(val)
		case "refusal":
			m.Refusal, ok = str(val)
		case "content":
			m.Content = rawBytes(val)
		case "function_call":
			m.FunctionCall = rawBytes(val)
		case "audio":
			m.Audio = rawBytes(val)
		case "tool_calls":
			if !val.isArray() {
				return false
			}
			m.ToolCalls = []json.RawMessage{}
			for tc := range val.elements() {
				m.ToolCalls = append(m.ToolCalls, rawBytes(tc))
			}
		}
		return ok
	})
	return m, ok
}

// decodeTextParts is json.Unmarshal(raw, &parts) for parts that have a
// type and text and nothing else.
func decodeTextParts(raw []byte) ([]contentPart, bool) {
	return decodeArray(raw, func(item jnode) (p contentPart, ok bool) {
		// Another field of contentPart, or an unknown one: encoding/json
		// decides.
		_, ok = readFields(item, partTextFields, false, func(f int, val jnode) bool {
			var ok bool
			if f == 0 {
				p.Type, ok = str(val)
			} else {
				p.Text, ok = str(val)
			}
			return ok
		})
		return p, ok
	})
}

var partTextFields = []string{"type", "text"}

// readFields calls fn with the index in names of each member of the
// object v that is one of them, in order, while fn returns true. It gives
// up (ok false) where encoding/json could read v otherwise: v is not an
// object, a name comes twice, a key is escaped or a name but for case —
// and on a name not in names unless skipUnknown. Bit i of seen is set
// where names[i] was read.
func readFields(v jnode, names []string, skipUnknown bool, fn func(f int, val jnode) bool) (seen uint64, ok bool) {
	if !v.isObject() {
		return 0, false
	}
	for k, val := range v.members() {
		f := field(k, names)
		if f == -1 && skipUnknown {
			continue
		}
		if f < 0 || seen&(1<<f) != 0 || !fn(f, val) {
			return seen, false
		}
		seen |= 1 << f
	}
	return seen, true
}

// field is the index in names of the key k; -1 for a plain key that is
// none of them, -2 for a key encoding/json might match differently: one
// with an escape, or one that is a name but for case.
func field(k jnode, names []string) int {
	if strings.IndexByte(k.raw, '\\') >= 0 {
		return -2
	}
	key := k.raw[1 : len(k.raw)-1]
	for i, n := range names {
		if n == key {
			return i
		}
	}
	for _, n := range names {
		if strings.EqualFold(n, key) {
			return -2
		}
	}
	return -1
}

// str is a JSON string's value as encoding/json decodes it; ok is false
// for anything else (a null too: encoding/json leaves the field as it
// was, which the caller's zero value would not tell).
func str(v jnode) (string, bool) {
	if !v.isString() {
		return "", false
	}
	s := v.raw[1 : len(v.raw)-1]
	if strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s) {
		return s, true
	}
	// Escapes, or bytes that are not UTF-8 (which encoding/json turns
	// into U+FFFD): its own unquoting, on this one string.
	var out string
	if err := json.Unmarshal([]byte(v.raw), &out); err != nil {
		return "", false
	}
	return out, true
}

// rawBytes is v's JSON text, as a json.RawMessage field receives it.
func rawBytes(v jnode) json.RawMessage {
	return unsafe.Slice(unsafe.StringData(v.raw), len(v.raw))
}

// jsonStr decodes raw, a JSON string, as encoding/json does.
func jsonStr(raw []byte) (string, bool) {
	return str(root(raw))
}

// decodeAnthropicMessages is json.Unmarshal(raw, &msgs) for an Anthropic
// Messages request's messages, read in place: encoding/json's reflection
// over a long conversation cost ten times the rest of its estimate.
func decodeAnthropicMessages(raw []byte) ([]anthropicMessage, bool) {
	return decodeArray(raw, func(item jnode) (m anthropicMessage, ok bool) {
		_, ok = readFields(item, anthropicMessageFields, true, func(f int, val jnode) bool {
			if f == 0 {
				var ok bool
				m.Role, ok = str(val)
				return ok
			}
			m.Content = rawBytes(val)
			return true
		})
		return m, ok
	})
}

var anthropicMessageFields = []string{"role", "content"}

// decodeBlocks is json.Unmarshal(raw, &blocks) for Anthropic content
// blocks that are not documents: a block with a source, a title or a
// context is left to encoding/json, as is any key spelled but for case.
func decodeBlocks(raw []byte) ([]anthropicBlock, bool) { return decodeArray(raw, decodeBlock) }

func decodeBlock(item jnode) (b anthropicBlock, ok bool) {
	_, ok = readFields(item, blockFields, true, func(f int, val jnode) bool {
		ok := true
		switch blockFields[f] {
		case "type":
			b.Type, ok = str(val)
		case "text":
			b.Text, ok = str(val)
		case "name":
			b.Name, ok = str(val)
		case "thinking":
			b.Thinking, ok = str(val)
		case "data":
			b.Data, ok = str(val)
		case "input":
			b.Input = rawBytes(val)
		case "content":
			b.Content = rawBytes(val)
		default: // source, title, context: a document's
			ok = false
		}
		return ok
	})
	return b, ok
}

// blockFields are anthropicBlock's JSON names.
var blockFields = []string{"type", "text", "name", "input", "content", "thinking", "data", "source", "title", "context"}
