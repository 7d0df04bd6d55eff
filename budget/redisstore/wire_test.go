package redisstore

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// wireNames reads the constants a script declares between its "wire:" and
// "end wire" lines.
func wireNames(t *testing.T, name, script string) map[string]string {
	t.Helper()
	_, rest, ok := strings.Cut(script, "-- wire:")
	if !ok {
		t.Fatalf("%s: no wire header", name)
	}
	header, _, ok := strings.Cut(rest, "-- end wire")
	if !ok {
		t.Fatalf("%s: wire header not closed", name)
	}
	decl := regexp.MustCompile(`^local ([A-Z_]+) = ("[^"]*"|-?\d+)$`)
	out := map[string]string{}
	for _, line := range strings.Split(header, "\n")[1:] {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		m := decl.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: wire header line %q is not `local NAME = value`", name, line)
		}
		out[m[1]] = strings.Trim(m[2], `"`)
	}
	return out
}

// The Go constants and the scripts' headers name the same values: a
// changed code on one side only fails here, not in production.
func TestWireMirrorsTheScripts(t *testing.T) {
	kinds := map[string]string{"K_RATE": kRate, "K_CEILING": kCeiling, "K_SLIDING": kSliding, "K_LOG": kLog,
		"K_CONCURRENCY": kConcurrency, "K_METER": kMeter, "EPOCH_FIELD": epochField}
	want := map[string]map[string]string{
		"reserve.lua": {
			"ALLOWED": fmt.Sprint(reserveAllowed), "REFUSED": fmt.Sprint(reserveRefused),
			"DUPLICATE": fmt.Sprint(reserveDuplicate), "OUT_OF_PERIOD": fmt.Sprint(reserveOutOfPeriod), "FENCED": fmt.Sprint(reserveFenced),
			"DEBIT_FIELDS": fmt.Sprint(debitFields),
		},
		"settle.lua": {
			"UNKNOWN": fmt.Sprint(settleUnknown), "SETTLED": fmt.Sprint(settleSettled), "SETTLED_BEFORE": fmt.Sprint(settleBefore),
			"EXPIRED": fmt.Sprint(settleExpired), "WITHOUT_RECORD": fmt.Sprint(settleWithoutRecord), "CORRECTED": fmt.Sprint(settleCorrected),
			"MODE_SETTLE": fmt.Sprint(modeSettle), "MODE_UNRESERVED": fmt.Sprint(modeUnreserved), "MODE_EXPIRE": fmt.Sprint(modeExpire),
		},
	}
	want["kinds.lua"] = kinds
	want["mark.lua"] = map[string]string{"MARK_LOST": fmt.Sprint(markLost), "FENCE_FIELD": fenceField, "REPLID_FIELD": replidField}
	want["lease.lua"] = map[string]string{"SLICE_FIELDS": fmt.Sprint(sliceFields), "REPLY_FIELDS": fmt.Sprint(leaseReplyFields)}
	for name, script := range map[string]string{"reserve.lua": reserveLua, "settle.lua": settleLua, "kinds.lua": kindsLua, "lease.lua": leaseLua, "mark.lua": markLua} {
		got := wireNames(t, name, script)
		for k, v := range want[name] {
			if got[k] != v {
				t.Errorf("%s: %s = %q, Go says %q", name, k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[name][k]; !ok {
				t.Errorf("%s: %s is not mirrored in wire.go", name, k)
			}
		}
	}
	// Every debit argument the encoder writes is one the script reads.
	if n := len((&op{}).appendTo(nil)); n != sliceFields {
		t.Errorf("a lease call writes %d values per bucket, SLICE_FIELDS is %d", n, sliceFields)
	}
	if n := len((&debitArg{}).appendTo(nil)); n != debitFields {
		t.Errorf("debitArg writes %d values, DEBIT_FIELDS is %d", n, debitFields)
	}
}
