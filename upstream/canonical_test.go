package upstream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
)

// Every key a Go server would decode into a field the gateway reads, but
// that the gateway itself would not read, is refused with its path.
func TestCaseFoldedNamesAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		ep    upstream.Endpoint
		body  string
		param string
	}{
		{"upper-case N", upstream.Chat, `{"model":"m","N":128,"messages":[{"role":"user","content":"x"}]}`, "N"},
		{"mixed-case stream", upstream.Chat, `{"model":"m","StrEam":true,"messages":[{"role":"user","content":"x"}]}`, "StrEam"},
		{"long s", upstream.Chat, `{"model":"m","ſtream":true,"messages":[{"role":"user","content":"x"}]}`, "ſtream"},
		{"escaped long s", upstream.Chat, `{"model":"m","\u017ftream":true,"messages":[{"role":"user","content":"x"}]}`, "ſtream"},
		{"a second model", upstream.Chat, `{"model":"cheap","Model":"dear","messages":[{"role":"user","content":"x"}]}`, "Model"},
		{"kelvin sign", upstream.Messages, `{"model":"m","max_tokens":5,"max_to\u212aens":99999,"messages":[{"role":"user","content":"x"}]}`, "max_to\u212aens"},
		{"stream options", upstream.Chat, `{"model":"m","stream":true,"stream_options":{"Include_Usage":false},"messages":[{"role":"user","content":"x"}]}`, "stream_options.Include_Usage"},
		{"message content", upstream.Chat, `{"model":"m","messages":[{"role":"user","content":"x","Content":"a much longer text"}]}`, "messages[0].Content"},
		{"content part", upstream.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"","TEXT":"long"}]}]}`, "messages[0].content[0].TEXT"},
		{"image detail", upstream.Chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u","Detail":"high"}}]}]}`, "messages[0].content[0].image_url.Detail"},
		{"completions best_of", upstream.Completions, `{"model":"m","prompt":"x","Best_Of":20}`, "Best_Of"},
		{"anthropic block", upstream.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"Type":"document","type":"text","text":"x"}]}]}`, "messages[0].content[0].Type"},
		{"anthropic tool result", upstream.Messages, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","Text":"x"}]}]}]}`, "messages[0].content[0].content[0].Text"},
		{"anthropic system", upstream.Messages, `{"model":"m","max_tokens":5,"system":[{"type":"text","TexT":"x"}],"messages":[{"role":"user","content":"x"}]}`, "system[0].TexT"},
		{"hosted tool type", upstream.Responses, `{"model":"m","input":"x","tools":[{"TYPE":"web_search"}]}`, "tools[0].TYPE"},
		{"responses cap", upstream.Responses, `{"model":"m","input":"x","Max_Output_Tokens":99999}`, "Max_Output_Tokens"},
		{"embeddings input", upstream.Embeddings, `{"model":"m","input":"x","INPUT":["a","b"]}`, "INPUT"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			_, err := upstream.ParseRequest(tc.ep, []byte(tc.body))
			var re *upstream.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RequestError", err)
			}
			if re.Param != tc.param || !strings.Contains(re.Message, tc.param) {
				t.Fatalf("param %q, message %q; want both to name %q", re.Param, re.Message, tc.param)
			}
		})
	}
}

// Keys the gateway does not read are the client's business, in any case:
// a tool's parameter names, a schema's properties, unknown top-level fields.
func TestNamesTheGatewayDoesNotReadPass(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"N":{"type":"string"},"Stream":{"type":"boolean"}}}}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"properties":{"Model":{"type":"string"}}}}}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{"Stream":"yes","N":"1"},"Temperature_Custom":1}`,
	} {
		if _, err := upstream.ParseRequest(upstream.Chat, []byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// Checking the names of a request's messages costs no allocation per
// message: an element's name ("messages[7]") is made only for an error or
// a field below it to check. ParseRequest allocates as much for 64
// messages as for 2.
func TestParseRequestAllocationsDoNotGrowWithMessages(t *testing.T) {
	body := func(n int) []byte {
		msgs := make([]string, n)
		for i := range msgs {
			msgs[i] = `{"role":"user","content":"message text"}`
		}
		return []byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`)
	}
	allocs := func(b []byte) float64 {
		return testing.AllocsPerRun(50, func() {
			if _, err := upstream.ParseRequest(upstream.Chat, b); err != nil {
				t.Fatal(err)
			}
		})
	}
	if few, many := allocs(body(2)), allocs(body(64)); many != few {
		t.Errorf("ParseRequest: %v allocations for 2 messages, %v for 64", few, many)
	}
}

// Estimating a request allocates no more for 64 string-content messages
// than for 2, on Messages as on chat: messages and blocks are read in
// place, not decoded by encoding/json, and their names are made for an
// error only. Content given as an array of parts or blocks costs one
// allocation a message (the decoded parts), no more.
func TestEstimateAllocationsPerMessage(t *testing.T) {
	m := model(t, "o200k_base")
	for _, ep := range []upstream.Endpoint{upstream.Chat, upstream.Messages} {
		body := func(n int, content string) []byte {
			msgs := make([]string, n)
			for i := range msgs {
				msgs[i] = `{"role":"` + []string{"user", "assistant"}[i%2] + `","content":` + content + `}`
			}
			return []byte(`{"model":"m","max_tokens":5,"messages":[` + strings.Join(msgs, ",") + `]}`)
		}
		allocs := func(b []byte) float64 {
			return testing.AllocsPerRun(20, func() {
				req, err := upstream.ParseRequest(ep, b)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := req.Prepare(m); err != nil {
					t.Fatal(err)
				}
			})
		}
		if few, many := allocs(body(2, `"message text"`)), allocs(body(64, `"message text"`)); many != few {
			t.Errorf("%s, string content: %v allocations for 2 messages, %v for 64", ep, few, many)
		}
		if few, many := allocs(body(2, `[{"type":"text","text":"a"}]`)), allocs(body(64, `[{"type":"text","text":"a"}]`)); many-few > 62 {
			t.Errorf("%s, parts: %v allocations for 2 messages, %v for 64", ep, few, many)
		}
	}
}

// Where a body names its messages twice, the second key escaped, the
// last is forwarded (the earlier duplicate is dropped) and so the last is
// estimated: the messages decoded while checking the first are not kept
// for the estimate.
func TestDuplicateMessagesEstimateTheForwardedOnes(t *testing.T) {
	m := model(t, "o200k_base")
	long := strings.Repeat("many words of a long prompt ", 200)
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"x"}],"messag\u0065s":[{"role":"user","content":"` + long + `"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"messages":[{"role":"user","content":"` + long + `"}]}`,
	} {
		p, err := prepare(t, m, upstream.Chat, body)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(p.Body), "many words") || strings.Contains(string(p.Body), `"content":"x"`) {
			t.Fatalf("forwarded: %.120s", p.Body)
		}
		if p.InputTokens < 1000 {
			t.Fatalf("%.60s...: %d input tokens estimated for the forwarded messages of some 1,200", body, p.InputTokens)
		}
	}
}
