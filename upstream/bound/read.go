package bound

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The gateway reads a client's body once, and the upstream reads the same
// bytes; where the two readings could differ, a body could be bounded as
// one request and billed as another. So the reading is the strict one that
// every upstream's agrees with:
//
//   - Names match exactly. A Go server folds case ("Detail" is "detail" to
//     it), a Python one does not: a name the gateway does not know
//     exactly is refused, so neither can read one the gateway skipped.
//   - A name sent twice in one object is refused, at any depth (I-JSON,
//     RFC 7493): Go, Python and JavaScript servers keep the last of two,
//     first-match readers the first.
//   - An object member the gateway does not know is refused: every field
//     an upstream may act on is one the bound has read. (At the top level
//     an operator may let named fields pass: Prepare checks those.)
//   - A string must be UTF-8, a number in an integer field an integer.
//
// The reader is json/v2 (github.com/go-json-experiment/json, the reference
// implementation of Go's encoding/json/v2), whose defaults are those rules
// but the unknown members, which strict turns on.
var strict = json.JoinOptions(json.RejectUnknownMembers(true))

// RequestError is a client's mistake in a request: the gateway answers 400
// with Param and Message and forwards nothing.
type RequestError struct {
	Param   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return "bound: bad request: " + e.Message
	}
	return fmt.Sprintf("bound: bad request: %s: %s", e.Param, e.Message)
}

// badRequest is a RequestError whose message names its field, whatever the
// caller wrote: "max_tokens must be an integer", not "must be an integer".
func badRequest(param, format string, args ...any) *RequestError {
	msg := fmt.Sprintf(format, args...)
	switch {
	case param == "" || strings.Contains(msg, param):
	case strings.HasPrefix(msg, "is ") || strings.HasPrefix(msg, "must "):
		msg = param + " " + msg
	default:
		msg = param + ": " + msg
	}
	return &RequestError{Param: param, Message: msg}
}

// unknown holds the top-level members of a body that its endpoint's type
// has no field for, read as they are (valid JSON, no name twice): Prepare
// refuses them, or lets them pass where the upstream's operator said so
// (upstreams[].pass_fields). Each request type embeds it.
type unknown struct {
	Unknown map[string]jsontext.Value `json:",inline"`
}

// read decodes body into dst (a pointer to a request type) the strict way.
// A refusal is a *RequestError that names the field.
func read(body []byte, dst any) error {
	if err := json.Unmarshal(body, dst, strict); err != nil {
		return readError(err)
	}
	return nil
}

// member is one top-level member of a body: its name, and where its value
// is (body[from:to]).
type member struct {
	name     string
	from, to int
}

// members splits body, a JSON object that read accepted (valid, no name
// twice), into its top-level members, in order: only a body whose top level
// the bound rewrites is split (Prepared.body). The values are stepped over,
// their strings a quote at a time, not read.
func members(body []byte) []member {
	var out []member
	i := skipSpace(body, 0) + 1 // past the {
	for {
		switch i = skipSpace(body, i); body[i] {
		case '}':
			return out
		case ',':
			i = skipSpace(body, i+1)
		}
		end := stringEnd(body, i)
		name := string(body[i+1 : end-1])
		if bytes.IndexByte(body[i:end], '\\') >= 0 {
			_ = json.Unmarshal(body[i:end], &name)
		}
		from := skipSpace(body, skipSpace(body, end)+1) // past the colon
		i = valueEnd(body, from)
		out = append(out, member{name: name, from: from, to: i})
	}
}

// skipSpace is where the white space from i ends.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// stringEnd is the index after the quote that closes the string whose
// opening quote is at i: a quote that an even run of backslashes precedes.
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		q := j + bytes.IndexByte(b[j:], '"')
		k := q
		for b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd is the index after the value that starts at i.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	return j
}

// Bounded reports whether name is a top-level field the bound reads or
// refuses for some endpoint, or one but for case (known is that field):
// such a name cannot be let pass unread on another endpoint
// (upstreams[].pass_fields), where a server that folds case, or serves
// several endpoints with one reading, would take it for the field the
// bound reads. A field that is free wherever it is known may pass.
func Bounded(name string) (known string, ok bool) {
	for t, fields := range tables {
		for f, i := range fields {
			if strings.EqualFold(f, name) && t.Field(i).Tag.Get("bound") != "free" {
				return f, true
			}
		}
	}
	return "", false
}

// tables are the top-level field names of each request type, by type:
// what Bounded looks names up in.
var tables = map[reflect.Type]map[string]int{}

// register notes request type T's field names, at init.
func register[T any]() {
	t := reflect.TypeFor[T]()
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	tables[t] = m
}

var errNotObject = errors.New("the body is not a JSON object")

// textOr is a value that is a string or an array of T (content: a text
// or parts; a prompt's input: a text or items); set says it is not missing
// or null.
type textOr[T any] struct {
	text string
	list []T
	set  bool
}

func (v *textOr[T]) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case '"':
		v.set = true
		return readString(d, &v.text)
	case '[':
		v.set = true
		return json.UnmarshalDecode(d, &v.list)
	case 'n':
		_, err := d.ReadToken()
		return err
	}
	return refuse("must be a string or an array")
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readString reads the next value, a string, into s: a content's text.
// (The token's own string, not another dispatch by json.UnmarshalDecode,
// for each message of a conversation.)
func readString(d *jsontext.Decoder, s *string) error {
	tok, err := d.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '"' {
		return refuse("must be a string")
	}
	*s = tok.String()
	return nil
}

// readError is a decoding error as the client is told it: which field,
// and what is wrong with it.
func readError(err error) *RequestError {
	var re *RequestError
	if errors.As(err, &re) {
		return re
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		switch param := paramOf(syn.JSONPointer.Parent()); {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			name := join(param, syn.JSONPointer.LastToken())
			return &RequestError{Param: name, Message: name +
				" is sent twice: a name may appear once in an object (servers differ on which of two they read, so the gateway cannot know what it would be billed for)"}
		case strings.Contains(syn.Err.Error(), "UTF-8"):
			return badRequest(paramOf(syn.JSONPointer), "is not valid UTF-8")
		}
		return &RequestError{Message: fmt.Sprintf("the body is not valid JSON: %v (at byte %d)", syn.Err, syn.ByteOffset)}
	}
	var sem *json.SemanticError
	if errors.As(err, &sem) {
		param := paramOf(sem.JSONPointer)
		var fe *fieldError
		switch {
		case errors.Is(sem.Err, errNotObject), param == "" && sem.JSONKind != '{' && sem.JSONKind != 0:
			return &RequestError{Message: errNotObject.Error()}
		case errors.As(sem.Err, &fe):
			return badRequest(join(param, fe.sub), "%s", fe.msg)
		case errors.Is(sem.Err, json.ErrUnknownName):
			return &RequestError{Param: param, Message: fmt.Sprintf(
				"%s is not a field the gateway knows: it forwards only fields whose cost it can bound (see docs/bounds.md)", param)}
		case sem.GoType != nil:
			return badRequest(param, "must be %s", kindOf(sem.GoType))
		}
		return badRequest(param, "%v", sem.Err)
	}
	return &RequestError{Message: "the body cannot be read: " + err.Error()}
}

// fieldError is a refusal of a value that decoded (a content union, an
// enumeration), from the decoding of one field: sub, if set, is a field
// below the one decoded.
type fieldError struct{ sub, msg string }

func (e *fieldError) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &fieldError{msg: fmt.Sprintf(format, args...)} }

// kindOf names what a Go type decodes from, for an error.
func kindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a JSON value"
}

// nextParam names the value d reads next, an array's element: d's
// pointer names the element read before it (or, before the first, the
// array).
func nextParam(d *jsontext.Decoder) string {
	kind, n := d.StackIndex(d.StackDepth())
	p := d.StackPointer()
	if kind != '[' {
		return paramOf(p)
	}
	if n > 0 {
		p = p.Parent()
	}
	return paramOf(p) + "[" + strconv.FormatInt(n, 10) + "]"
}

// paramOf names the value at a JSON pointer as the APIs name parameters:
// "/messages/0/content" is messages[0].content.
func paramOf(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 31); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// join names field key of the value named path ("" is the body); a key
// that is an index ("[3]") follows its array's name directly.
func join(path, key string) string {
	switch {
	case path == "":
		return key
	case key == "":
		return path
	case key[0] == '[':
		return path + key
	}
	return path + "." + key
}

// under names e's field below the value named prefix: for an error from
// reading a value apart from the body (a free field translation reads).
func (e *RequestError) under(prefix string) *RequestError {
	param := join(prefix, e.Param)
	if e.Param != "" {
		e.Message = strings.Replace(e.Message, e.Param, param, 1)
	} else {
		e.Message = param + ": " + e.Message
	}
	e.Param = param
	return e
}
