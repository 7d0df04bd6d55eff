package upstream

import (
	"strconv"
	"strings"
)

// A shape is what the gateway reads at one level of a request body: the
// field names it looks up there, and the shapes of the values below it.
//
// A server written in Go decodes JSON into structs with encoding/json, which
// matches a key to a field by Unicode simple case folding: "N", "Stream",
// "ſtream" (long s) and "\u212aey" (Kelvin sign) all land in the same field as
// "n", "stream" and "key". The gateway reads names exactly, so such a key
// would be forwarded unread — and a Go upstream would act on it ("N": 128
// generated 128 choices against a reservation for one). Every key the gateway
// could be blind to is therefore refused: one that folds to a name the
// gateway reads at that level, but is not that name.
type shape struct {
	names []string // names read at this level
	kids  []*shape // the shape of each name's value, or nil
	each  *shape   // the shape of every element, where the value is an array
}

// check walks v against s; path is the parameter name of v, or of the
// array v is element index of (index -1: v is not an element). An
// element's own name ("messages[3]") is made only where it is needed — an
// error, a field below it to check — not for every element.
func (s *shape) check(v jnode, path string, index int) error {
	if s == nil {
		return nil
	}
	switch {
	case v.isArray() && s.each != nil:
		path = elem(path, index)
		i := 0
		for item := range v.elements() {
			if err := s.each.check(item, path, i); err != nil {
				return err
			}
			i++
		}
	case v.isObject():
		for k, val := range v.members() {
			if _, err := s.member(k, val, path, index); err != nil {
				return err
			}
		}
	}
	return nil
}

// elem is the name of element index of the array named path, or path
// where index is -1.
func elem(path string, index int) string {
	if index < 0 {
		return path
	}
	return path + "[" + strconv.Itoa(index) + "]"
}

// member checks one member of an object of shape s, and the value below it:
// its key is refused where it folds to a name s reads but is not that
// name. key is the member's name, unescaped; where it is one s reads, it
// is that name's own string (it does not point into the body). path and
// index name the object, as check's do.
func (s *shape) member(k, val jnode, path string, index int) (key string, err error) {
	key = keyName(k)
	i, ok := s.name(key)
	if !ok {
		if i >= 0 {
			name := s.names[i]
			param := join(elem(path, index), key)
			return "", badRequest(param, "%s is not a field name: send %q (servers that match names case-insensitively read %q as %q, which the gateway would not have estimated)", param, name, key, name)
		}
		return strings.Clone(key), nil
	}
	if kid := s.kids[i]; kid != nil && (val.isObject() || val.isArray()) {
		if err := kid.check(val, join(elem(path, index), s.names[i]), -1); err != nil {
			return "", err
		}
	}
	return s.names[i], nil
}

// checkMessages is chatMsgShape's check of a chat request's messages, v,
// made by decoding them — the estimate's next step, which then takes them
// as decoded — instead of a walk of its own over every message (a fifth
// of a small request's parsing). A decoding that succeeds read only keys
// that are the names exactly or fold to none of them (field gives up on
// any other, and on escaped keys): the check's rule for the messages'
// level. Their content parts are checked as the shape does. Where the
// decoding gives up, the shape's own walk checks them and names the key
// it refuses.
func (r *Request) checkMessages(v jnode) error {
	msgs, ok := decodeMessages(rawBytes(v))
	if !ok {
		r.msgs, r.msgsOf = nil, ""
		return chatMsgShape.check(v, "messages", -1)
	}
	r.msgs, r.msgsOf = msgs, v.raw
	for i := range msgs {
		if c := root(msgs[i].Content); c.isArray() || c.isObject() {
			if err := partShape.check(c, join(elem("messages", i), "content"), -1); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// name reports whether k is a name s reads (ok: i is its index), or else
// the index of the name k folds to, if any (else -1).
func (s *shape) name(k string) (i int, ok bool) {
	for i, n := range s.names {
		if n == k {
			return i, true
		}
	}
	for i, n := range s.names {
		if strings.EqualFold(n, k) {
			return i, false
		}
	}
	return -1, false
}

// obj is a shape reading names, with the shapes of some of their values.
func obj(kids map[string]*shape, names ...string) *shape {
	s := &shape{names: names, kids: make([]*shape, len(names))}
	for k, kid := range kids {
		s.names, s.kids = append(s.names, k), append(s.kids, kid)
	}
	return s
}

// kid sets the shape of name's value.
func (s *shape) kid(name string, kid *shape) {
	i, _ := s.name(name)
	s.kids[i] = kid
}

// list is the shape of an array of elem (or of a lone elem).
func list(elem *shape) *shape {
	s := *elem
	s.each = elem
	return &s
}

var (
	streamOptionsShape = obj(nil, "include_usage")
	// toolShape: tool definitions are counted as their whole JSON text, so
	// only the type, which decides whether a tool is hosted, is read.
	toolShape = list(obj(nil, "type"))
	imageURL  = obj(nil, "url", "detail")
	partShape = list(obj(map[string]*shape{"image_url": imageURL}, "type", "text", "detail", "file_id", "input_audio", "file"))
	// (checkMessages checks a message's content with partShape.)
	chatMsgShape = list(obj(map[string]*shape{"content": partShape},
		"role", "name", "tool_calls", "function_call", "tool_call_id", "refusal", "audio"))
	blockShape = func() *shape {
		b := obj(map[string]*shape{"source": obj(nil, "type", "media_type", "data", "url"),
			"cache_control": obj(nil, "type", "ttl"), "content": nil},
			"type", "text", "name", "input", "thinking", "data")
		b.kid("content", list(b)) // a tool result holds blocks
		return list(b)
	}()
	responsesItemShape = list(obj(map[string]*shape{"content": partShape},
		"type", "role", "name", "arguments", "call_id", "output"))
)

// shapes are what the gateway reads of each endpoint's body.
var shapes = map[Endpoint]*shape{
	Chat: obj(map[string]*shape{
		"messages":        chatMsgShape,
		"stream_options":  streamOptionsShape,
		"tools":           toolShape,
		"functions":       toolShape,
		"response_format": obj(nil, "type", "json_schema"),
		"prediction":      obj(nil, "type", "content"),
	}, "model", "stream", "max_tokens", "max_completion_tokens", "n", "best_of", "user",
		"service_tier", "audio", "modalities", "web_search_options"),
	Completions: obj(map[string]*shape{"stream_options": streamOptionsShape},
		"model", "prompt", "suffix", "stream", "max_tokens", "n", "best_of", "user", "echo", "service_tier"),
	Embeddings: obj(nil, "model", "input", "user", "stream"),
	Messages: obj(map[string]*shape{
		"messages": list(obj(map[string]*shape{"content": blockShape}, "role")),
		"system":   blockShape,
		"tools":    toolShape,
		"metadata": obj(nil, "user_id"),
	}, "model", "max_tokens", "stream", "service_tier", "mcp_servers", "container"),
	Responses: obj(map[string]*shape{
		"input": responsesItemShape,
		"tools": toolShape,
		"text":  obj(map[string]*shape{"format": obj(nil, "type")}),
	}, "model", "instructions", "max_output_tokens", "stream", "user",
		"previous_response_id", "conversation", "prompt", "service_tier", "background"),
}
