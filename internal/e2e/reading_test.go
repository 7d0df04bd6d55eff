package e2e_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/redistest"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

// Each way a body could be bounded as one request and billed as another —
// a name sent twice below the top level, a field the gateway does not
// know, a beta nobody knows — is refused with 400 naming the
// field, before anything is reserved or forwarded: the upstream (which
// reads as a Go server does and bills every extra) is not called and
// bills nothing. On the embedded store and on Redis.
func TestTheUpstreamReadsWhatWasBounded(t *testing.T) {
	img := `{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"low","detail":"high"}}`
	msgs := `"messages":[{"role":"user","content":"hello"}]`
	for _, tc := range []struct {
		desc, route, body, beta, param string
	}{
		{"an image's detail twice, low then high", "/v1/chat/completions",
			`{"model":"test-model","messages":[{"role":"user","content":[` + strings.Repeat(img+",", 3) + img + `]}]}`, "", "messages[0].content[0].image_url.detail"},
		{"a part-level detail a chat upstream ignores", "/v1/chat/completions",
			`{"model":"test-model","messages":[{"role":"user","content":[{"type":"image_url","detail":"low","image_url":{"url":"https://x/a.png"}}]}]}`, "", "messages[0].content[0].detail"},
		{"a hosted tool in a function's second type", "/v1/responses",
			`{"model":"test-model","input":"hi","tools":[{"type":"function","name":"f","parameters":{},"type":"web_search"}]}`, "", "tools[0].type"},
		{"a server tool in a custom tool's second type", "/v1/messages",
			`{"model":"` + claude + `","max_tokens":50,` + msgs + `,"tools":[{"type":"custom","name":"w","input_schema":{"type":"object"},"type":"web_search_20250305"}]}`, "", "tools[0].type"},
		{"a prediction's content twice, short then long", "/v1/chat/completions",
			`{"model":"test-model",` + msgs + `,"prediction":{"type":"content","content":"a","content":"` + strings.Repeat("long ", 300) + `"}}`, "", "prediction.content"},
		{"a beta nobody knows", "/v1/messages",
			`{"model":"` + claude + `","max_tokens":50,` + msgs + `}`, "no-such-beta-2026-12-01", "anthropic-beta"},
		{"OpenRouter's web plugin", "/v1/chat/completions",
			`{"model":"test-model",` + msgs + `,"plugins":[{"id":"web","max_results":10}]}`, "", "plugins"},
		{"OpenRouter's model fallbacks", "/v1/chat/completions",
			`{"model":"test-model",` + msgs + `,"models":["gpt-4o","test-model"]}`, "", "models"},
		{"xAI's live search", "/v1/chat/completions",
			`{"model":"test-model",` + msgs + `,"search_parameters":{"mode":"on"}}`, "", "search_parameters"},
		{"a case-folded cap", "/v1/chat/completions",
			`{"model":"test-model",` + msgs + `,"max_tokens":5,"Max_Tokens":1000}`, "", "Max_Tokens"},
	} {
		for _, store := range []string{"embedded", "redis"} {
			t.Run(tc.desc+"/"+store, func(t *testing.T) {
				addr := ""
				if store == "redis" {
					addr = redistest.Start(t).Addr
				}
				r := newBoundRigOn(t, addr, simulated.Options{})
				var h http.Header
				if tc.beta != "" {
					h = http.Header{"Anthropic-Beta": {tc.beta}}
				}
				w := r.check(t, tc.route, []byte(tc.body), h)
				if w.Code != http.StatusBadRequest {
					t.Fatalf("status %d, want 400: %s", w.Code, w.Body)
				}
				param, msg := errorParam(t, w.Body.Bytes())
				if param != tc.param || !strings.Contains(msg, tc.param) {
					t.Fatalf("refusal names %q (%q), want %q", param, msg, tc.param)
				}
				if n := r.sim.Stats().Requests; n != 0 {
					t.Fatalf("the upstream was called %d times", n)
				}
				if len(r.entries) != 0 {
					t.Fatalf("a refusal left ledger entries: %+v", r.entries)
				}
			})
		}
	}
}

// errorParam is the field a refusal names, in either client's shape.
func errorParam(t *testing.T, body []byte) (param, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Param   string `json:"param"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if e.Error.Param == "" { // Anthropic's shape names the field in the message only
		for _, w := range strings.Fields(e.Error.Message) {
			w = strings.TrimRight(w, ":,.")
			if slices.Contains([]string{"speed", "anthropic-beta", "inference_geo", "tools[0].type"}, w) {
				e.Error.Param = w
				break
			}
		}
	}
	return e.Error.Param, e.Error.Message
}

// A usage that leaves a figure out is not read as 0: the output the
// upstream did not report is charged at the request's bound, the ledger
// says which figure it was, and what the upstream billed is within it.
func TestAFigureNotReportedIsChargedAtTheBound(t *testing.T) {
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			addr := ""
			if store == "redis" {
				addr = redistest.Start(t).Addr
			}
			r := newBoundRigOn(t, addr, simulated.Options{Fault: simulated.PartialUsage})
			w := r.check(t, "/v1/chat/completions", []byte(`{"model":"test-model","max_tokens":40,"messages":[{"role":"user","content":"hello"}]}`), nil)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if len(r.entries) != 1 {
				t.Fatalf("%d ledger entries", len(r.entries))
			}
			e := r.entries[0]
			if e.Usage.OutputTokens != 40 || !slices.Equal(e.Usage.Unreported, []string{"output_tokens"}) || !e.Usage.Estimated {
				t.Fatalf("charged %+v; want the output at its bound of 40, marked unreported", e.Usage)
			}
			if e.Cost != e.Reserved {
				t.Fatalf("charged %v, reserved %v", e.Cost, e.Reserved)
			}
		})
	}
}
