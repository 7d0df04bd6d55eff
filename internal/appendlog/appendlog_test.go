package appendlog_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/internal/appendlog"
)

// A rewrite applies to every line enqueued before it and to none after:
// lines and rewrites keep the order they were asked in.
func TestARewriteKeepsTheOrderOfLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := appendlog.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var pending []appendlog.Pending
	for i := 1; i <= 5; i++ {
		pending = append(pending, f.Enqueue([]byte(strconv.Itoa(i)+"\n")))
	}
	if err := f.Rewrite(func(line []byte) bool { n, _ := strconv.Atoi(string(line)); return n%2 == 0 }); err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Append([]byte("6\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(data)); strings.Join(got, ",") != "2,4,6" {
		t.Fatalf("the file holds %v, want 2,4,6", got)
	}
	if st, _ := os.Stat(path); f.Committed() != st.Size() {
		t.Fatalf("committed %d, the file has %d bytes", f.Committed(), st.Size())
	}
}
