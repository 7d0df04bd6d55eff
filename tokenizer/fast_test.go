package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// patterns are the encodings' split patterns as tiktoken-go compiles them.
var patterns = map[string]string{
	"o200k_base": strings.Join([]string{
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
		`\p{N}{1,3}`, ` ?[^\s\p{L}\p{N}]+[\r\n/]*`, `\s*[\r\n]+`, `\s+(?!\S)`, `\s+`,
	}, "|"),
	"cl100k_base": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

// regexPieces are s's pieces by the pattern on regexp2, as tiktoken-go
// finds them (on runes).
func regexPieces(t testing.TB, enc, s string) []string {
	re := regexp2.MustCompile(patterns[enc], regexp2.None)
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func fastPieces(enc, s string) []string {
	f := &fast{}
	f.next = map[string]func(scanner, int) int{"o200k_base": scanner.nextO200k, "cl100k_base": scanner.nextCl100k}[enc]
	if !utf8.ValidString(s) {
		s = asRunes(s)
	}
	var out []string
	sc := scanner{s}
	for i := 0; i < len(s); {
		e := f.next(sc, i)
		out = append(out, s[i:e])
		i = e
	}
	return out
}

// same checks the fast count of s against tiktoken-go's, and its pieces
// against the regex's, for both encodings.
func same(t testing.TB, s string) {
	t.Helper()
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		c, err := Load(enc)
		if err != nil {
			t.Fatal(err)
		}
		if longRun(s) {
			continue // counted by its byte length on purpose (BPE is quadratic)
		}
		want := int64(len(c.Encode(s)))
		if got := c.fast.count(s); got != want {
			re, fp := regexPieces(t, enc, asRunes(s)), fastPieces(enc, s)
			for i := range min(len(re), len(fp)) {
				if re[i] != fp[i] {
					t.Fatalf("%s: %q: %d tokens, tiktoken-go %d; piece %d is %q, the regex's %q", enc, clip(s), got, want, i, fp[i], re[i])
				}
			}
			t.Fatalf("%s: %q: %d tokens, tiktoken-go %d (%d pieces, the regex's %d)", enc, clip(s), got, want, len(fp), len(re))
		}
	}
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// mixedCorpus is text of every kind a prompt carries.
var mixedCorpus = []string{
	"The quick brown fox jumps over the lazy dog. It's, I'M, you'Re, they'VE, we'll, he'd, DON'T, 'tis.",
	"func main() {\n\tfmt.Println(\"hello, 世界\")\n\tfor i := 0; i < 10; i++ {\n\t\tx += i // sum\n\t}\n}\n",
	"def f(x):\r\n    return {'a': [1, 2, 3], \"b\": None}  \r\n\r\n\n\n   \t\n",
	"{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4096}",
	"日本語のテキストと漢字、カタカナ。中文句子，标点符号！한국어 문장입니다.",
	"العربية نص مع تشكيل: مُحَمَّد. हिन्दी पाठ: नमस्ते दुनिया, क्षत्रिय।",
	"emoji 👩‍💻🚀🇺🇸 👍🏽 ❤️‍🔥 ok😀😀😀 ✨✨",
	"digits 1234567890 3.14159 1,000,000 ١٢٣٤٥ ⅫⅣ ²³ 0x1F 007",
	"   leading spaces and trailing   \t\t  \n  \u00a0nbsp\u3000ideographic\u2028line\u2029para\u0085nel",
	"CamelCaseWord HTTPServer iPhone ÉCOLE Ǆemo ǅungla ﬁligree ŉapostrophe ʰmodifier",
	"\u0301combining at start e\u0301 a\u0308\u0323 Å \ufeffbom zero\u200bwidth",
	"paths /usr/local/bin/ and urls https://example.com/a/b?c=d#e //comment /* block */",
	"mixed---dashes___underscores...ellipsis!!!???;;; @@@ ### $$$ %%% ^^^ &&& ***",
	strings.Repeat("word ", 300) + strings.Repeat("\n", 7) + strings.Repeat(" ", 50) + "x",
	strings.Repeat("9", 200) + " " + strings.Repeat("12 ", 40),
	"'s 'S 'll 'LL 're 'Ve 'm 'D 't ''s '' 'x 'r 'v 'l",
	"Ünïcödé Ωμέγα Кириллица ÀÉÎÕÜ ǈǋǲ ᾈᾉ ƻƼ",
	"tab\tseparated\tvalues\r\nwindows\r\nlines\r\r\n\n\r",
	"\x80\xff invalid \xc3\x28 utf8 \xe2\x82 end\xf0",
}

func TestFastCountsMatchTiktoken(t *testing.T) {
	for _, s := range mixedCorpus {
		same(t, s)
	}
	// The corpus glued together, and long enough to be cut and counted
	// on every core.
	all := strings.Join(mixedCorpus, "\n")
	same(t, all)
	same(t, strings.Repeat(all+"\n", 40))
}

// Random text drawn from every class the patterns tell apart, in runs.
func TestFastCountsMatchTiktokenOnRandomText(t *testing.T) {
	alphabet := []string{"a", "Z", "é", "É", "ǅ", "ʰ", "中", "ア", "\u0301", "\u0903", "7", "٣", "Ⅻ", "²", " ", "  ", "\t", "\n", "\r", "\r\n",
		"\u00a0", "\u3000", "\u2028", "\u0085", "'", "'s", "'LL", "'ve", "/", ".", "!", "—", "😀", "\u200d", "\ufeff", "$", "_", "-", "\x80", "ﬁ"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(40) {
			b.WriteString(strings.Repeat(alphabet[rng.IntN(len(alphabet))], 1+rng.IntN(3)))
		}
		same(t, b.String())
	}
}

func FuzzFastCount(f *testing.F) {
	for _, s := range mixedCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		same(t, s)
	})
}
