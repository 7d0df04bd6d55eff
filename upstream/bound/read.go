package bound

import (
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

// member is one top-level member of a body: its name, where its value is
// (body[from:to]), and whether the endpoint's type has a field of its name.
type member struct {
	name     string
	from, to int
	known    bool
}

// fieldsOf maps the JSON names of the fields of a request type (a struct)
// to their index.
func fieldsOf(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// topLevel reads a body into dst, a pointer to an endpoint's request type,
// noting where each top-level member's value is: the body is forwarded as
// sent, its top level rewritten where the bound needs it (Prepared.Body).
// A member of a name dst has no field for is kept unread (valid JSON, no
// name twice) for Prepare to refuse or let pass.
type topLevel struct {
	body    []byte
	dst     reflect.Value
	fields  map[string]int
	members []member
}

func (t *topLevel) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	if d.PeekKind() != '{' {
		return errNotObject
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	for {
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		if tok.Kind() == '}' {
			return nil
		}
		name := tok.String()
		after := int(d.InputOffset())
		i, known := t.fields[name]
		if known {
			err = json.UnmarshalDecode(d, t.dst.Field(i).Addr().Interface())
		} else {
			_, err = d.ReadValue()
		}
		if err != nil {
			return err
		}
		t.members = append(t.members, member{name: name, from: valueAt(t.body, after), to: int(d.InputOffset()), known: known})
	}
}

var errNotObject = errors.New("the body is not a JSON object")

// valueAt is where the value after a member's name, which ends at i,
// starts: past the colon and the white space around it.
func valueAt(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' || b[i] == ':') {
		i++
	}
	return i
}

// read decodes body into dst (a pointer to a request type) the strict way,
// returning its top-level members in order. A refusal is a *RequestError
// that names the field.
func read(body []byte, dst any, members []member) ([]member, error) {
	v := reflect.ValueOf(dst).Elem()
	t := &topLevel{body: body, dst: v, fields: tableOf(v.Type()), members: members}
	if err := json.Unmarshal(body, t, strict); err != nil {
		return nil, readError(err)
	}
	return t.members, nil
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

// tables are fieldsOf each request type, made once.
var tables = map[reflect.Type]map[string]int{}

// tableOf is the field table of request type t; each request type is
// registered at init (register), so the map is only read here.
func tableOf(t reflect.Type) map[string]int {
	if f, ok := tables[t]; ok {
		return f
	}
	return fieldsOf(t)
}

// register makes the field table of request type T at init.
func register[T any]() {
	t := reflect.TypeFor[T]()
	tables[t] = fieldsOf(t)
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
		case errors.Is(sem.Err, errNotObject):
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
