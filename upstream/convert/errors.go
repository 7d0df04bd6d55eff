package convert

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// ReadError reads an upstream's error answer in wire w: its message (the
// body itself when it has none the wire defines).
func ReadError(w Wire, header http.Header, body []byte) string {
	r := gjson.ParseBytes(body)
	var msg string
	switch w {
	case OpenAI, Gemini, Anthropic:
		msg = r.Get("error.message").String()
	case Converse:
		msg = r.Get("message").String()
		if msg == "" {
			msg = r.Get("Message").String()
		}
		if t := header.Get("X-Amzn-Errortype"); t != "" {
			t, _, _ = strings.Cut(t, ":")
			msg = t + ": " + msg
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(string(body))
		if len(msg) > 500 {
			msg = msg[:500]
		}
	}
	return msg
}

// WriteError writes an upstream's refusal or failure, with its status, in
// the client's wire: the shape the client's SDK raises its own typed
// errors from.
func WriteError(w Wire, status int, message string) []byte {
	return WriteErrorCode(w, status, "", message)
}

// WriteErrorCode is WriteError with a machine-readable code for OpenAI's
// shape ("" for the status's own, or none); Anthropic's shape has only
// the type.
func WriteErrorCode(w Wire, status int, code, message string) []byte {
	if w == Anthropic {
		typ := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
			413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		b, _ := marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
		return b
	}
	typ, own := "invalid_request_error", ""
	switch {
	case status == 401:
		typ, own = "authentication_error", "invalid_api_key"
	case status == 403:
		typ = "permission_error"
	case status == 404:
		typ, own = "not_found_error", "model_not_found"
	case status == 429:
		typ, own = "rate_limit_error", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	var c any // null, as OpenAI sends it, when there is none
	if code == "" {
		code = own
	}
	if code != "" {
		c = code
	}
	b, _ := marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
	return b
}
