package bound

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Units says where a request to a paid HTTP API states the most units it
// may be billed: a query parameter, a header, a top-level member of its
// JSON body, or the body's own length in bytes (for APIs billing the
// characters of what they are sent). Exactly one is set on a route priced
// per unit: units that no request bounds cannot be reserved.
type Units struct {
	Query     string `yaml:"query"`
	Header    string `yaml:"header"`
	JSON      string `yaml:"json"`
	BodyBytes bool   `yaml:"body_bytes"`
}

// IsZero reports whether u names no source.
func (u Units) IsZero() bool { return u == Units{} }

// Sources is how many sources u names (a route takes exactly one).
func (u Units) Sources() int {
	n := 0
	for _, set := range []bool{u.Query != "", u.Header != "", u.JSON != "", u.BodyBytes} {
		if set {
			n++
		}
	}
	return n
}

// String names u's source as a client reads it in an error.
func (u Units) String() string {
	switch {
	case u.Query != "":
		return "the query parameter " + u.Query
	case u.Header != "":
		return "the header " + u.Header
	case u.JSON != "":
		return "the body's member " + u.JSON
	case u.BodyBytes:
		return "the body's length in bytes"
	}
	return "nothing"
}

// PaidUnits is the most units a paid call may be billed, read from where u
// says — rawQuery, header and body as the client sent them — and checked
// against max. It is read as strictly as any body: a name sent twice (in
// any letter case, which some servers fold), a value that is not a
// non-negative integer, a body that is not one JSON object, and a bound
// past max are refused with a *RequestError naming the parameter.
func PaidUnits(u Units, rawQuery string, header http.Header, body []byte, max int64) (int64, error) {
	var (
		value string
		param string
	)
	switch {
	case u.Query != "":
		param = u.Query
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return 0, &RequestError{Param: param, Message: "the query string does not parse: " + err.Error()}
		}
		var names []string
		for k, vs := range q {
			if strings.EqualFold(k, u.Query) {
				names = append(names, k)
				if len(vs) > 1 {
					return 0, unitsError(param, "is sent %d times; send it once", len(vs))
				}
				value = vs[0]
			}
		}
		if len(names) > 1 {
			return 0, unitsError(param, "is sent as %s; send it once, spelt %s", strings.Join(names, " and "), u.Query)
		}
		if len(names) == 1 && names[0] != u.Query {
			return 0, unitsError(param, "is spelt %s; spell it %s", names[0], u.Query)
		}
		// Many servers read a form body's fields with the query's (and
		// over them): the bound must be the only one.
		if inForm(header.Get("Content-Type"), body, u.Query) {
			return 0, unitsError(param, "is in the body too; send it in the query string only")
		}
	case u.Header != "":
		param = u.Header
		vs := header.Values(u.Header)
		if len(vs) > 1 {
			return 0, unitsError(param, "is sent %d times; send it once", len(vs))
		}
		if len(vs) == 1 {
			value = vs[0]
		}
	case u.JSON != "":
		param = u.JSON
		var obj map[string]jsontext.Value
		if err := json.Unmarshal(body, &obj); err != nil || obj == nil { // a name twice is refused
			msg := "the body must be one JSON object with " + u.JSON + " in it"
			if err != nil {
				msg += ": " + err.Error()
			}
			return 0, &RequestError{Param: param, Message: msg}
		}
		for k, v := range obj {
			if strings.EqualFold(k, u.JSON) && k != u.JSON {
				return 0, unitsError(param, "is spelt %s; spell it %s, once", k, u.JSON)
			}
			if k == u.JSON {
				if v.Kind() != '0' {
					return 0, unitsError(param, "must be an integer, got %s", v)
				}
				value = string(v)
			}
		}
	case u.BodyBytes:
		n := int64(len(body))
		if n > max {
			return 0, &RequestError{Message: fmt.Sprintf("the body is %d bytes; this route bills up to one unit a byte and takes at most %d", n, max)}
		}
		return n, nil
	default:
		return 0, &RequestError{Message: "this route's units are bounded by nothing (units_limit)"}
	}
	if value == "" {
		return 0, unitsError(param, "is missing: this route bills per unit and reserves the most a call may use; send %s (at most %d)", param, max)
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 0 || value[0] == '+' || (len(value) > 1 && value[0] == '0') {
		return 0, unitsError(param, "must be a non-negative integer, got %q", value)
	}
	if n > max {
		return 0, unitsError(param, "is %d; this route takes at most %d", n, max)
	}
	return n, nil
}

// PaidBilled reads the units a paid API reports it billed, as a decimal
// number, rounded up to whole units: 2.5 units are billed as 3, never 2.
// ok is false for anything else (no figure, a negative one, or one too
// large to be real); the call is then charged its reservation.
func PaidBilled(s string) (units int64, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" || len(whole) > 12 {
		return 0, false
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, false
	}
	if strings.Trim(frac, "0") != "" {
		n++
	}
	return n, true
}

// unitsError is a RequestError whose message starts with the parameter.
func unitsError(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: param + " " + fmt.Sprintf(format, args...)}
}

// inForm reports whether a form body (URL-encoded or multipart) has a
// field named name, in any letter case. A form that does not parse counts
// as having it.
func inForm(contentType string, body []byte, name string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false // not a form: a server reads no field from it
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return true
		}
		for k := range q {
			if strings.EqualFold(k, name) {
				return true
			}
		}
	case "multipart/form-data":
		r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			part, err := r.NextPart()
			if err == io.EOF {
				return false
			}
			if err != nil {
				return true
			}
			if strings.EqualFold(part.FormName(), name) {
				return true
			}
		}
	}
	return false
}
