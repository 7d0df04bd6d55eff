package bound_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream"
	"github.com/tollgate-dev/tollgate/upstream/bound"
	"github.com/tollgate-dev/tollgate/upstream/convert"
	"github.com/tollgate-dev/tollgate/upstream/simulated"
)

var update = flag.Bool("update", false, "rewrite golden files")

func model(t testing.TB, enc string) *bound.Model {
	t.Helper()
	c, err := tokenizer.Load(enc)
	if err != nil {
		t.Fatal(err)
	}
	return &bound.Model{Name: "m", Counter: c, MaxOutputTokens: 4096, DefaultOutputTokens: 512, ImageTokens: 1445, ImageTokensLow: 85}
}

// native serves every endpoint as it is: no translation.
type native struct{}

func (native) Serves(bound.Endpoint) bool { return true }

func prepare(t testing.TB, m *bound.Model, ep bound.Endpoint, body string) (*bound.Prepared, error) {
	t.Helper()
	req, err := bound.Parse(ep, []byte(body), nil)
	if err != nil {
		return nil, err
	}
	return req.Prepare(m, native{})
}

// refusal checks err is a *RequestError naming param, in its Param and its
// message.
func refusal(t testing.TB, err error, param string) *bound.RequestError {
	t.Helper()
	var re *bound.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a RequestError naming %q", err, param)
	}
	if re.Param != param || !strings.Contains(re.Message, param) {
		t.Fatalf("param %q, message %q; want both to name %q", re.Param, re.Message, param)
	}
	return re
}

// corpus is varied on purpose: CJK, emoji, code, long whitespace, names,
// tools, tool calls, images, several choices.
var corpus = []string{
	`{"model":"m","messages":[{"role":"user","content":"Hello!"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"你是一个有用的助手。请用中文回答。"},{"role":"user","content":"東京の天気は？ 오늘 날씨 어때요?"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"🙂🙃🤖👩‍👩‍👧‍👦🏳️‍🌈 emoji soup 🍜🍣🍱"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"func main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i)\n\t}\n}\n\n` + "```" + `python\ndef f(x):\n    return {k: v for k, v in x.items() if v}\n` + "```" + `"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat(" ", 500) + `x` + strings.Repeat(`\n\n\t  `, 200) + `"}]}`,
	`{"model":"m","messages":[{"role":"system","name":"example_user","content":"New synergies will help drive top-line growth."},{"role":"user","name":"bob","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"What's the weather in Paris and Tokyo?"}],"tools":[{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather in a given location","parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":21,\"sky\":\"clear\"}"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"high"}}]}]}`,
	`{"model":"m","n":3,"max_tokens":20,"messages":[{"role":"user","content":"Three haiku please"}]}`,
	`{"model":"m","stream":true,"messages":[{"role":"user","content":"stream it"}]}`,
}

// TestEstimateBoundsReportedUsage sends every prepared request to the
// simulated upstream, which counts as the API does, and checks the bound
// is never below what it reports.
func TestEstimateBoundsReportedUsage(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		sim, err := simulated.New(simulated.Options{Encodings: map[string]string{"m": enc}, ReplyTokens: func(uint64) int64 { return 1 << 20 }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(sim)
		defer srv.Close()
		m := model(t, enc)
		for i, body := range corpus {
			t.Run(fmt.Sprintf("%s/%d", enc, i), func(t *testing.T) {
				req, err := bound.Parse(bound.Chat, []byte(body), nil)
				if err != nil {
					t.Fatal(err)
				}
				p, err := req.Prepare(m, native{})
				if err != nil {
					t.Fatal(err)
				}
				prompt, completion := reported(t, srv.URL, p.Body, req.Stream)
				if p.InputTokens < prompt {
					t.Errorf("input bound %d < reported %d", p.InputTokens, prompt)
				}
				if p.MaxOutputTokens < completion {
					t.Errorf("output bound %d < reported %d", p.MaxOutputTokens, completion)
				}
				if !strings.Contains(body, "image_url") && p.InputTokens > prompt*2+20 {
					t.Errorf("input bound %d is far above the reported %d", p.InputTokens, prompt)
				}
			})
		}
	}
}

func reported(t *testing.T, url string, body []byte, stream bool) (prompt, completion int64) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !stream {
		raw, _ := io.ReadAll(resp.Body)
		u, err := convert.AnswerUsage(convert.OpenAI, raw)
		if err != nil {
			t.Fatalf("no usage in %s: %v", raw, err)
		}
		return u.Input, u.Output
	}
	meter := upstream.NewStreamMeter(1 << 20)
	events := upstream.NewEventReader(resp.Body)
	for {
		_, data, err := events.Next()
		if data != nil {
			if _, err := meter.Observe(data); err != nil {
				t.Fatal(err)
			}
		}
		if err != nil {
			break
		}
	}
	u := meter.Usage()
	if !u.Reported() || !meter.Done() {
		t.Fatal("stream without usage or [DONE]")
	}
	return u.Input, u.Output
}

// Golden files: testdata/rewrite/NAME.txt holds an endpoint line, a client
// body, a "---" line and the body the gateway forwards with its bound.
func TestRewriteGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/rewrite/*.txt")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	m := model(t, "o200k_base")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			head, want, ok := strings.Cut(string(data), "\n---\n")
			if !ok {
				t.Fatal("no --- separator")
			}
			epName, in, _ := strings.Cut(head, "\n")
			ep := map[string]bound.Endpoint{"chat": bound.Chat, "completions": bound.Completions, "embeddings": bound.Embeddings, "messages": bound.Messages, "responses": bound.Responses}[epName]
			req, err := bound.Parse(ep, []byte(in), nil)
			if err != nil {
				t.Fatal(err)
			}
			mm := *m
			switch ep {
			case bound.Embeddings:
				mm.Embedding, mm.MaxOutputTokens, mm.DefaultOutputTokens = true, 0, 0
			case bound.Messages:
				mm.TokenRatio = 1.35
			}
			p, err := req.Prepare(&mm, native{})
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%s\ninput_tokens=%d max_output_tokens=%d client_wants_usage=%v user=%q\n", p.Body, p.InputTokens, p.MaxOutputTokens, p.ClientWantsUsage, req.User)
			if *update {
				if err := os.WriteFile(f, []byte(head+"\n---\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Fatalf("rewrite of %s:\n got: %s\nwant: %s", f, got, want)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	m := model(t, "o200k_base")
	for _, tc := range []struct {
		desc, body, param string
	}{
		{"array body", `[1,2]`, ""},
		{"model not a string", `{"model":5,"messages":[]}`, "model"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages"},
		{"message without role", `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role"},
		{"n zero", `{"model":"m","n":0,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{"n huge", `{"model":"m","n":1000,"messages":[{"role":"user","content":"x"}]}`, "n"},
		{"cap not an integer", `{"model":"m","max_tokens":1e300,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"cap a fraction", `{"model":"m","max_tokens":50.5,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"cap past the model's", `{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"stream not bool", `{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream"},
		{"bad stream options", `{"model":"m","stream":true,"stream_options":[],"messages":[{"role":"user","content":"x"}]}`, "stream_options"},
		{"content neither string nor parts", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{"file part without data", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`, "messages[0].content[0]"},
		{"uploaded file", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages[0].content[0]"},
		{"file not a PDF", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/csv;base64,YSxi"}}]}]}`, "messages[0].content[0]"},
		{"a part with another type's field", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x","image_url":{"url":"u"}}]}]}`, "messages[0].content[0].image_url"},
		{"a part without its field", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0].image_url"},
		{"a string that is not UTF-8", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "messages[0].content"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := prepare(t, m, bound.Chat, tc.body)
			var re *bound.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RequestError", err)
			}
			if re.Param != tc.param {
				t.Fatalf("param = %q, want %q (%s)", re.Param, tc.param, re.Message)
			}
			if !strings.Contains(re.Message, re.Param) {
				t.Fatalf("message %q does not name its field %q", re.Message, re.Param)
			}
		})
	}
}
