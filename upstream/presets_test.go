package upstream_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/upstream"
)

// Groq reports a stream's usage in x_groq on its last chunk.
func TestGroqStreamUsage(t *testing.T) {
	meter := upstream.NewStreamMeter(1 << 10)
	for _, ev := range []string{
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"queue_time":0.01,"prompt_tokens":12,"prompt_time":0.002,"completion_tokens":3,"completion_time":0.01,"total_tokens":15,"total_time":0.02}}}`,
	} {
		if usageOnly, err := meter.Observe([]byte(ev)); err != nil || usageOnly {
			t.Fatalf("%s: usage-only %v, %v", ev, usageOnly, err)
		}
	}
	if u := meter.Usage(); !u.Reported() || u.Input != 12 || u.Output != 3 {
		t.Fatalf("usage %+v", u)
	}
}
