package e2e_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/go-pdf/fpdf"
)

// words is n words of text, some 2 tokens each.
func words(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%d ", i%97)
	}
	return b.String()
}

func repeat(n int, f func(i int) string) string {
	s := make([]string, n)
	for i := range s {
		s[i] = f(i)
	}
	return strings.Join(s, ",")
}

// onePagePDF is a one-page PDF in base64.
func onePagePDF(t *testing.T) string {
	t.Helper()
	doc := fpdf.New("P", "mm", "A4", "")
	doc.AddPage()
	var b strings.Builder
	if err := doc.Output(&b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString([]byte(b.String()))
}

// The holes an outside red team found in the first version of the bound
// package, each now refused or bounded (check fails a case billed past its
// reservation): fields of one kind of a union carried by another, text
// the bound did not count (a reasoning item's content, a text source
// labelled a PDF, mixed prompt arrays), what a translation adds (a message
// a tool result), text parts whose joined text counts more than their
// parts, enum values, white space in a tool's JSON.
func TestRedTeamHolesAreClosed(t *testing.T) {
	r := newBoundRig(t)
	hidden := words(20000)
	ws := strings.Repeat(" \n\t\r", 20000)
	for _, c := range []struct{ name, route, body string }{
		{"a reasoning item's content", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"` + hidden + `"}]}],"max_output_tokens":5}`},
		{"a message item's name", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"hi","name":"` + hidden + `"}],"max_output_tokens":5}`},
		{"a message item's output", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"hi","output":"` + hidden + `"}],"max_output_tokens":5}`},
		{"a function call's content", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}","content":"` + hidden + `"}],"max_output_tokens":5}`},
		{"additional tools' content", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":"hi"},{"type":"additional_tools","tools":[],"role":"user","content":"` + hidden + `"}],"max_output_tokens":5}`},
		{"a refusal part's text", "/v1/responses", `{"model":"test-model","input":[{"role":"assistant","content":[{"type":"refusal","refusal":"","text":"` + hidden + `"}]}],"max_output_tokens":5}`},
		{"an image part's text", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png","text":"` + hidden + `"}]}],"max_output_tokens":5}`},
		{"a tool use's text", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{},"text":"` + hidden + `"}]}]}`},
		{"an image block's text", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="},"text":"` + hidden + `"}]}]}`},
		{"redacted thinking's text", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"x","text":"` + hidden + `"}]}]}`},
		{"a tool reference's text", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_reference","tool_name":"f","text":"` + hidden + `"}]}]}`},
		{"a text source labelled a PDF", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"application/pdf","data":"hello"}}]}]}`},
		{"a PDF in a text source", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"application/pdf","data":"` + onePagePDF(t) + `"}}]}]}`},
		{"a text document translated", "/v1/messages", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hello"}}]}]}`},
		{"tool results translated into messages", "/v1/messages", `{"model":"gpt-4o","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[` + repeat(3000, func(int) string { return `{"type":"tool_result","tool_use_id":"t"}` }) + `]}]}`},
		{"strings and token ids in one prompt", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":["x",1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"max_tokens":100,"n":16}`},
		{"a schema on a text format", "/v1/responses", `{"model":"test-model","input":"hi","max_output_tokens":5,"text":{"format":{"type":"text","schema":{"description":"` + hidden + `"}}}}`},
		{"text blocks that join into more tokens", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":[` + repeat(4000, func(i int) string { return `{"type":"text","text":"` + []string{" xwm", "pq"}[i%2] + `"}` }) + `]}]}`},
		{"text parts that join into more tokens, translated", "/v1/chat/completions", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":[` + repeat(4000, func(i int) string { return `{"type":"text","text":"` + []string{" xwm", "pq"}[i%2] + `"}` }) + `]}]}`},
		{"a long enum", "/v1/chat/completions", `{"model":"test-model","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"string","enum":[` + repeat(3000, func(i int) string { return fmt.Sprintf(`"%c"`, 'a'+i%26) }) + `]}}}}}]}`},
		{"white space in a tool's schema", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"` + ws + `}}]}`},
		{"white space in a tool call's input", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1` + ws + `}}]},{"role":"user","content":"ok"}]}`},
		{"white space in a function's parameters", "/v1/responses", `{"model":"test-model","input":"hi","max_output_tokens":5,"tools":[{"type":"function","name":"f","parameters":{"type":"object"` + ws + `}}]}`},
		{"a file by data and by URL", "/v1/responses", `{"model":"test-model","input":[{"role":"user","content":[{"type":"input_file","file_data":"data:application/pdf;base64,` + onePagePDF(t) + `","file_url":"https://x/a.pdf"}]}],"max_output_tokens":5}`},
		{"an API version nobody knows", "/v1/messages", `{"model":"` + claude + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h http.Header
			if c.name == "an API version nobody knows" {
				h = http.Header{"Anthropic-Version": {"2099-01-01"}}
			}
			w := r.check(t, c.route, []byte(c.body), h)
			if w.Code == http.StatusTooManyRequests {
				t.Fatalf("refused by a limit, not by the bound: %s", w.Body)
			}
			t.Logf("status %d", w.Code)
		})
	}
}

// A namespace in a namespace is refused, and read no deeper: nested
// thousands deep, it cost the first version seconds and gigabytes.
func TestNestedNamespacesAreRefusedCheaply(t *testing.T) {
	r := newBoundRig(t)
	d := 4990
	body := `{"model":"test-model","input":"hi","max_output_tokens":5,"tools":[` + strings.Repeat(`{"type":"namespace","tools":[`, d) +
		`{"type":"function","name":"f"}` + strings.Repeat(`]}`, d) + `]}`
	w := r.check(t, "/v1/responses", []byte(body), nil)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "namespace") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}
