package tokenizer_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/tokenizer"
)

func load(t testing.TB, enc string) *tokenizer.Counter {
	t.Helper()
	c, err := tokenizer.Load(enc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cookbookMessages are the example messages of the OpenAI cookbook's "How to
// count tokens with tiktoken", whose prompt token counts the API reported:
// 129 for the cl100k_base models, 124 for the o200k_base ones.
var cookbookMessages = []tokenizer.ChatMessage{
	{Role: "system", Texts: []string{"You are a helpful, pattern-following assistant that translates corporate jargon into plain English."}},
	{Role: "system", Name: "example_user", Texts: []string{"New synergies will help drive top-line growth."}},
	{Role: "system", Name: "example_assistant", Texts: []string{"Things working well together will increase revenue."}},
	{Role: "system", Name: "example_user", Texts: []string{"Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."}},
	{Role: "system", Name: "example_assistant", Texts: []string{"Let's talk later when we're less busy about how to do better."}},
	{Role: "user", Texts: []string{"This late pivot means we don't have time to boil the ocean for the client deliverable."}},
}

func TestChatMatchesCookbook(t *testing.T) {
	for _, tc := range []struct {
		desc, enc string
		want      int64
	}{
		{"gpt-4 and gpt-3.5-turbo", "cl100k_base", 129},
		{"gpt-4o and gpt-4o-mini", "o200k_base", 124},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := load(t, tc.enc)
			for range 2 { // the second pass is served from the cache
				if got := c.Chat(cookbookMessages, nil); got != tc.want {
					t.Fatalf("Chat = %d, want %d", got, tc.want)
				}
			}
		})
	}
}

func TestCountKnownStrings(t *testing.T) {
	for _, tc := range []struct {
		enc, text string
		want      int64
	}{
		{"cl100k_base", "tiktoken is great!", 6},
		{"cl100k_base", "", 0},
		// Special-token text in user input is ordinary text (7 pieces), never
		// the one control token.
		{"cl100k_base", "<|endoftext|>", 7},
	} {
		if got := load(t, tc.enc).Count(tc.text); got != tc.want {
			t.Errorf("%s Count(%q) = %d, want %d", tc.enc, tc.text, got, tc.want)
		}
	}
}

// The cookbook's tool example: its own estimate of the tool definitions for
// gpt-4o. Counting the JSON must never come out below it.
func TestToolsCountIsAnUpperBound(t *testing.T) {
	c := load(t, "o200k_base")
	tool := `{"type":"function","function":{"name":"get_current_weather","description":"Get the current weather in a given location","parameters":{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},"unit":{"type":"string","description":"The unit of temperature to return","enum":["celsius","fahrenheit"]}},"required":["location"]}}}`
	// The cookbook's rules for gpt-4o: 7 per function, its "name:desc" line,
	// 3 for properties, per property 3 + "name:type:desc", enums -3 + 3 per
	// item + the item, and 12 at the end.
	cookbook := int64(7) + c.Count("get_current_weather:Get the current weather in a given location") +
		3 + 3 + c.Count("location:string:The city and state, e.g. San Francisco, CA") +
		3 - 3 + 3 + c.Count("celsius") + 3 + c.Count("fahrenheit") + c.Count("unit:string:The unit of temperature to return") + 12
	msgs := []tokenizer.ChatMessage{{Role: "user", Texts: []string{"What's the weather like in Paris?"}}}
	with := c.Chat(msgs, []string{tool})
	without := c.Chat(msgs, nil)
	if with-without < cookbook {
		t.Fatalf("tools counted %d, below the cookbook's %d", with-without, cookbook)
	}
}

func TestChatCountsImagesAndExtras(t *testing.T) {
	c := load(t, "o200k_base")
	base := c.Chat([]tokenizer.ChatMessage{{Role: "user", Texts: []string{"hi"}}}, nil)
	got := c.Chat([]tokenizer.ChatMessage{{Role: "user", Texts: []string{"hi"}, ImageTokens: 2 * 765, Extra: []string{"call_1"}}}, nil)
	if want := base + 2*765 + c.Count("call_1"); got != want {
		t.Fatalf("Chat = %d, want %d", got, want)
	}
}

func TestLoadUnknownEncoding(t *testing.T) {
	if _, err := tokenizer.Load("no_such_base"); err == nil {
		t.Fatal("an unknown encoding loaded")
	}
}

func benchText(tokens int) string {
	// About 23 tokens a line of mixed prose, code, CJK and emoji.
	line := "The quick brown fox jumps over the lazy dog. 你好世界 🙂 if x := f(y); x != nil { return x }\n"
	return strings.Repeat(line, tokens/23+1)
}

func BenchmarkCount(b *testing.B) {
	c := load(b, "o200k_base")
	for _, n := range []int{1_000, 10_000, 100_000} {
		text := benchText(n)
		b.Run(fmt.Sprintf("tokens=%d/uncached", n), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for i := 0; b.Loop(); i++ {
				c.Count(text + fmt.Sprint(i)) // a new string each time misses the cache
			}
		})
		b.Run(fmt.Sprintf("tokens=%d/cached", n), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			c.Count(text) // warm: b.Loop times only what follows
			for b.Loop() {
				c.Count(text)
			}
		})
	}
}

func ExampleCounter_Chat() {
	c, _ := tokenizer.Load("o200k_base")
	n := c.Chat([]tokenizer.ChatMessage{
		{Role: "system", Texts: []string{"You are terse."}},
		{Role: "user", Texts: []string{"Say hi."}},
	}, nil)
	fmt.Println(n)
	// Output: 18
}

// A text with a very long run of one class is bounded by its byte length
// instead of BPE, which is quadratic in a piece's length: the bound stays
// an upper bound, and ordinary text stays exact.
func TestLongRunsAreBoundedByBytes(t *testing.T) {
	c := load(t, "o200k_base")
	for _, s := range []string{
		strings.Repeat("a", 300),
		"prefix " + strings.Repeat("é", 200) + " suffix",
		strings.Repeat("=", 400),
		strings.Repeat(" ", 300) + "x",
	} {
		if got, exact := c.Count(s), int64(len(c.Encode(s))); got != int64(len(s)) || got < exact {
			t.Errorf("Count(%.20q…) = %d, want the byte length %d (exact %d)", s, got, len(s), exact)
		}
	}
	// Long text of ordinary runs is counted exactly: prose, base64 (its
	// digits and symbols split the letters), digits.
	for _, s := range []string{
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50),
		strings.Repeat("aGVsbG8gd29ybGQ9PQ+/", 40),
		strings.Repeat("1234567890", 100),
	} {
		if got, exact := c.Count(s), int64(len(c.Encode(s))); got != exact {
			t.Errorf("Count(%.20q…) = %d, want exactly %d", s, got, exact)
		}
	}
	// The attack that made this necessary: a megabyte of one letter.
	if got := c.Count(strings.Repeat("a", 1<<20)); got != 1<<20 {
		t.Errorf("a megabyte of letters counts %d", got)
	}
}

// A counter for a tokenizer that splits numbers into digits counts a run
// of n digits as at least n tokens, and text without digits as BPE does.
func TestSplitDigitsCountsEveryDigit(t *testing.T) {
	c, err := tokenizer.Load("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	d := c.SplitDigits()
	if d.SplitDigits() != d || c.SplitDigits() != d {
		t.Fatal("SplitDigits is not one counter per encoding")
	}
	digits := strings.Repeat("1234567890", 2000)
	if n := d.Count(digits); n < 20000 || n != c.Count(digits)+20000 {
		t.Fatalf("20,000 digits counted %d (BPE %d)", n, c.Count(digits))
	}
	if text := "no numbers here, only words"; d.Count(text) != c.Count(text) {
		t.Fatalf("text without digits: %d, BPE %d", d.Count(text), c.Count(text))
	}
	if got := d.Decode(d.Encode("x 42")); got != "x 42" {
		t.Fatalf("round trip %q", got)
	}
}

// The bytes counter counts every text as its UTF-8 length, which no
// byte-level BPE count of it exceeds (each token holds a byte or more),
// nor a tokenizer that makes each digit a token: checked against both
// BPE encodings, built on each with and without its digits, on
// prose, code, CJK, emoji, digits and punctuation. It is one counter per
// base, splitting digits leaves it as it is, and its Estimate is its base.
func TestBytesBoundEveryBPECount(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		c, err := tokenizer.Load(enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, base := range []*tokenizer.Counter{c, c.SplitDigits()} {
			b := base.Bytes()
			if b.Bytes() != b || base.Bytes() != b || b.SplitDigits() != b || b.Estimate() != base || base.Estimate() != base {
				t.Fatalf("%s: Bytes, SplitDigits and Estimate do not compose", base.Name())
			}
			for _, s := range []string{
				"The gateway reserves before it forwards, and settles after.",
				"func f(x int) (int, error) { return x * 2, nil } // 😀",
				"予算は月ごとに決められ、チームごとに報告される。",
				"0123456789 3.14159 2026-12-07",
				"!?!?;;::..,,--==++**&&^^%%$$##@@",
				"👩‍👩‍👧‍👦🇺🇦",
				"",
			} {
				if n := b.Count(s); n != int64(len(s)) || n < c.Count(s) {
					t.Errorf("%s: %q counts %d bytes; %d by %s", b.Name(), s, n, c.Count(s), enc)
				}
			}
		}
	}
}
