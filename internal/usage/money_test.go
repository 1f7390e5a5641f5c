package usage

import (
	"strings"
	"testing"
)

func TestMoneyParseFormat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Money
		out  string
	}{
		{"12.34 USD", Money{1234, "USD"}, "12.34 USD"},
		{"12.3 USD", Money{1230, "USD"}, "12.30 USD"},
		{"7 USD", Money{700, "USD"}, "7.00 USD"},
		{"0.05 EUR", Money{5, "EUR"}, "0.05 EUR"},
		{"-0.05 EUR", Money{-5, "EUR"}, "-0.05 EUR"},
		{"-1.50 USD", Money{-150, "USD"}, "-1.50 USD"},
		{"1500 JPY", Money{1500, "JPY"}, "1500 JPY"},
		{"1.234 KWD", Money{1234, "KWD"}, "1.234 KWD"},
	} {
		got, err := ParseMoney(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseMoney(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		if got.String() != c.out {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), c.out)
		}
		if back, err := ParseMoney(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q: %v, %v", got.String(), back, err)
		}
	}
	for _, c := range []struct{ in, msg string }{
		{"12.345 USD", "more than 2 decimal digits"},
		{"1.5 JPY", "more than 0 decimal digits"},
		{"12,34 USD", "not a decimal number"},
		{"12.34", "not an amount and a currency"},
		{"12.34 usd", "three-letter ISO 4217"},
		{"1e3 USD", "not a decimal number"},
		{". USD", "not a decimal number"},
		{"99999999999999999999 USD", "out of range"},
	} {
		if _, err := ParseMoney(c.in); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseMoney(%q) error = %v, want one saying %q", c.in, err, c.msg)
		}
	}
}

func TestOverheadParse(t *testing.T) {
	for in, want := range map[string]int{"12.5": 1250, "0": 0, "100": 10000, "7.25%": 725} {
		if got, err := ParseOverhead(in); err != nil || got != want {
			t.Errorf("ParseOverhead(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"100.01", "-1", "abc", "1.234", ""} {
		if _, err := ParseOverhead(in); err == nil {
			t.Errorf("ParseOverhead(%q) accepted", in)
		}
	}
	if FormatOverhead(1250) != "12.50" {
		t.Errorf("FormatOverhead(1250) = %q", FormatOverhead(1250))
	}
}
