package bound_test

import (
	"fmt"

	"github.com/tollgate-dev/tollgate/tokenizer"
	"github.com/tollgate-dev/tollgate/upstream/bound"
)

// A chat request without an output cap is bounded at the model's default
// cap, written into the body it is forwarded with.
func ExampleRequest_Prepare() {
	counter, _ := tokenizer.Load("o200k_base")
	m := &bound.Model{Name: "gpt-4o-mini", Counter: counter, MaxOutputTokens: 16384, DefaultOutputTokens: 256}
	req, err := bound.Parse(bound.Chat, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := req.Prepare(m, native{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s\ninput ≤ %d tokens, output ≤ %d\n", p.Body, p.InputTokens, p.MaxOutputTokens)
	// Output:
	// {"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}],"max_completion_tokens":256}
	// input ≤ 9 tokens, output ≤ 256
}

// A name sent twice is refused, wherever it is: the upstream would read
// the last, and the gateway cannot know which it would be billed for.
func ExampleParse() {
	_, err := bound.Parse(bound.Chat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[
		{"type":"image_url","image_url":{"url":"https://x/cat.png","detail":"low","detail":"high"}}]}]}`), nil)
	fmt.Println(err.(*bound.RequestError).Param)
	// Output:
	// messages[0].content[0].image_url.detail
}
