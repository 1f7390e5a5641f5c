package usage

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Money is an exact amount: an integer count of the currency's minor units
// (cents for USD), never a float.
type Money struct {
	Minor    int64
	Currency string
}

// minorDigits are the ISO 4217 minor-unit exponents that differ from 2.
var minorDigits = map[string]int{
	"JPY": 0, "KRW": 0, "VND": 0, "CLP": 0, "ISK": 0,
	"BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3, "TND": 3,
}

// MinorDigits is how many decimal digits the currency's minor unit has.
func MinorDigits(currency string) int {
	if d, ok := minorDigits[currency]; ok {
		return d
	}
	return 2
}

func validCurrency(c string) error {
	if len(c) != 3 || strings.ToUpper(c) != c || strings.IndexFunc(c, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return fmt.Errorf("currency %q is not a three-letter ISO 4217 code such as USD", c)
	}
	return nil
}

// ParseAmount reads a decimal amount ("12.34", "-0.5", "7") in currency,
// rejecting more decimal digits than the currency's minor unit holds.
func ParseAmount(s, currency string) (Money, error) {
	if err := validCurrency(currency); err != nil {
		return Money{}, err
	}
	digits := MinorDigits(currency)
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(t, "-")
	whole, frac, hasDot := strings.Cut(t, ".")
	if whole == "" || (hasDot && frac == "") || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return Money{}, fmt.Errorf("amount %q is not a decimal number such as 12.34", s)
	}
	if len(frac) > digits {
		return Money{}, fmt.Errorf("amount %q has more than %d decimal digits for %s", s, digits, currency)
	}
	frac += strings.Repeat("0", digits-len(frac))
	minor, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return Money{}, fmt.Errorf("amount %q is out of range", s)
	}
	if neg {
		minor = -minor
	}
	return Money{Minor: minor, Currency: currency}, nil
}

// ParseMoney reads "12.34 USD".
func ParseMoney(s string) (Money, error) {
	amount, cur, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return Money{}, fmt.Errorf("money %q is not an amount and a currency such as \"12.34 USD\"", s)
	}
	return ParseAmount(amount, strings.TrimSpace(cur))
}

// Amount is the decimal amount without the currency: "12.34".
func (m Money) Amount() string {
	digits := MinorDigits(m.Currency)
	sign, v := "", m.Minor
	if v < 0 {
		sign = "-"
	}
	s := strconv.FormatUint(absU(v), 10)
	if digits == 0 {
		return sign + s
	}
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	return sign + s[:len(s)-digits] + "." + s[len(s)-digits:]
}

func absU(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

// String is "12.34 USD", which ParseMoney reads back.
func (m Money) String() string { return m.Amount() + " " + m.Currency }

// Add sums two amounts of the same currency (it panics on a mix: every
// amount of one computation comes from one rate card).
func (m Money) Add(o Money) Money {
	if m.Currency != o.Currency && m.Currency != "" && o.Currency != "" {
		panic(fmt.Sprintf("usage: adding %s to %s", o.Currency, m.Currency))
	}
	c := m.Currency
	if c == "" {
		c = o.Currency
	}
	return Money{Minor: m.Minor + o.Minor, Currency: c}
}

// roundRat rounds an exact fraction of minor units half away from zero.
func roundRat(r *big.Rat) int64 {
	n, d := new(big.Int).Set(r.Num()), r.Denom()
	neg := n.Sign() < 0
	n.Abs(n)
	n.Mul(n, big.NewInt(2)).Add(n, d)
	q := n.Quo(n, new(big.Int).Mul(d, big.NewInt(2)))
	if neg {
		q.Neg(q)
	}
	return q.Int64()
}

// floorRat is the largest integer not above r, and r minus it (in [0, 1)).
func floorRat(r *big.Rat) (int64, *big.Rat) {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	// DivMod is Euclidean: m >= 0, so q is the floor for a positive divisor.
	return q.Int64(), new(big.Rat).SetFrac(m, r.Denom())
}
