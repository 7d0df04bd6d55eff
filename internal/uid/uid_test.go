package uid

import (
	"strings"
	"testing"
)

// TestTextIsUniqueAndUniform: ids are of the alphabet, of the length asked
// for, never repeat, and every character of the alphabet turns up in
// every position about as often (a fixed or biased position would fail).
func TestTextIsUniqueAndUniform(t *testing.T) {
	const n, length = 64000, 26
	seen := make(map[string]bool, n)
	var counts [length][32]int
	for range n {
		id := Text(length)
		if len(id) != length {
			t.Fatalf("Text(%d) = %q: %d characters", length, id, len(id))
		}
		if seen[id] {
			t.Fatalf("Text(%d) = %q twice", length, id)
		}
		seen[id] = true
		for i := range length {
			c := strings.IndexByte(alphabet, id[i])
			if c < 0 {
				t.Fatalf("Text(%d) = %q: %q is not of the alphabet", length, id, id[i])
			}
			counts[i][c]++
		}
	}
	// Each count is binomial(64000, 1/32): mean 2000, deviation 44;
	// 1700 and 2300 are some seven deviations out.
	for i := range length {
		for c, k := range counts[i] {
			if k < 1700 || k > 2300 {
				t.Errorf("position %d: %q %d times in %d, expected about %d", i, alphabet[c], k, n, n/32)
			}
		}
	}
}

// TestPrefixed: the prefix, then n characters of the alphabet; a prefix
// longer than the stack buffer too.
func TestPrefixed(t *testing.T) {
	for _, prefix := range []string{"", "acme/", strings.Repeat("p", 70)} {
		id := Prefixed(prefix, 26)
		if len(id) != len(prefix)+26 || !strings.HasPrefix(id, prefix) || strings.Trim(id[len(prefix):], alphabet) != "" {
			t.Fatalf("Prefixed(%q, 26) = %q", prefix, id)
		}
	}
}

func BenchmarkText(b *testing.B) {
	for b.Loop() {
		_ = Text(26)
	}
}
