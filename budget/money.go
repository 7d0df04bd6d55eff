package budget

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Money is an amount in micro-dollars (1e-6 USD). Money never holds a float:
// every price and every charge is an integer number of micro-dollars, so sums
// in the store and the ledger are exact.
type Money int64

// Dollar is one US dollar in micro-dollars.
const Dollar Money = 1_000_000

// ErrOverflow reports an amount too large to represent in int64.
var ErrOverflow = errors.New("budget: amount overflows int64")

// String formats m as dollars with all six decimals, e.g. "$1.250000".
func (m Money) String() string {
	var b [32]byte
	return string(m.appendMicros(b[:0], true))
}

// appendMicros appends m as [-][$]D.DDDDDD, written digit by digit: the
// limit headers of every response carry two such figures, and fmt cost
// 2,000 instructions each.
func (m Money) appendMicros(b []byte, dollarSign bool) []byte {
	sign, u := m.abs()
	b = append(b, sign...)
	if dollarSign {
		b = append(b, '$')
	}
	b = strconv.AppendUint(b, u/1_000_000, 10)
	f := u % 1_000_000
	return append(b, '.', byte('0'+f/100_000), byte('0'+f/10_000%10), byte('0'+f/1_000%10),
		byte('0'+f/100%10), byte('0'+f/10%10), byte('0'+f%10))
}

// Micros is m in dollars with six decimals and no dollar sign:
// "1200.500000", "-0.000001".
func (m Money) Micros() string {
	var b [32]byte
	return string(m.appendMicros(b[:0], false))
}

// AppendMicros appends m as Micros writes it.
func (m Money) AppendMicros(b []byte) []byte { return m.appendMicros(b, false) }

// abs splits m into its sign ("-" or "") and its magnitude.
func (m Money) abs() (string, uint64) {
	if m < 0 {
		return "-", uint64(-m)
	}
	return "", uint64(m)
}

// Dollars formats m for people: thousands separated, cents always, and
// the sub-cent digits only where there are some ("$1,200.50", "$0.0012").
func (m Money) Dollars() string {
	sign, u := m.abs()
	whole := strconv.FormatUint(u/1_000_000, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return sign + "$" + whole + cents(u)
}

// Cents formats m for people rounded to the cent, half up: "$1,200.50",
// "$0.00" for 1 µ$. For figures read at a glance (spend); an amount that
// someone set is shown whole with Dollars.
func (m Money) Cents() string {
	sign, u := m.abs()
	u = (u + 5_000) / 10_000 * 10_000
	if u == 0 {
		sign = ""
	}
	return sign + Money(u).Dollars()
}

// Decimal formats m as a plain decimal number of dollars for files and
// spreadsheets: no sign of the currency, no separators, cents always
// ("1200.50", "0.0012").
func (m Money) Decimal() string {
	sign, u := m.abs()
	return sign + strconv.FormatUint(u/1_000_000, 10) + cents(u)
}

// cents is the fraction of u µ$: "." and two digits, more where needed.
func cents(u uint64) string {
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return "." + frac
}

// mulDivCeil returns ceil(a*b/d) for non-negative a, b and positive d, computed
// in 128 bits so that no intermediate product can overflow.
func mulDivCeil(a, b, d int64) (int64, error) {
	if a < 0 || b < 0 || d <= 0 {
		return 0, fmt.Errorf("budget: mulDivCeil(%d, %d, %d): negative operand", a, b, d)
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 0, ErrOverflow
	}
	q, r := bits.Div64(hi, lo, uint64(d))
	if r != 0 {
		q++
	}
	if q > 1<<63-1 {
		return 0, ErrOverflow
	}
	return int64(q), nil
}

// mulDivFloor returns floor(a*b/d) for non-negative a, b and positive d.
func mulDivFloor(a, b, d int64) (int64, error) {
	if a < 0 || b < 0 || d <= 0 {
		return 0, fmt.Errorf("budget: mulDivFloor(%d, %d, %d): negative operand", a, b, d)
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 0, ErrOverflow
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	if q > 1<<63-1 {
		return 0, ErrOverflow
	}
	return int64(q), nil
}

// addChecked returns a+b or ErrOverflow.
func addChecked(a, b int64) (int64, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, ErrOverflow
	}
	return s, nil
}
