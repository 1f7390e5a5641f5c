package usage

import (
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestRateCardLookupInForceEachHour(t *testing.T) {
	card, err := ParseRateCard([]byte(`{"currency": "USD", "rates": [
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-11-15T12:00:00Z", "hourly": "90.00"},
	  {"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01", "hourly": "98.32", "borrowed_hourly": "120"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	for _, c := range []struct {
		hour           string
		ok             bool
		hourly, borrow int64
	}{
		{"2025-12-31T23:00:00Z", false, 0, 0},
		{"2026-01-01T00:00:00Z", true, 9832, 12000},
		{"2026-11-15T11:00:00Z", true, 9832, 12000},
		{"2026-11-15T12:00:00Z", true, 9000, 9000}, // no borrowed rate: the hourly one
		{"2027-06-01T00:00:00Z", true, 9000, 9000},
	} {
		r, ok := card.RateAt("ml.p5.48xlarge", at(c.hour))
		if ok != c.ok || r.Hourly.Minor != c.hourly || r.Borrowed.Minor != c.borrow {
			t.Errorf("RateAt(%s) = %+v, %v; want %d/%d, %v", c.hour, r, ok, c.hourly, c.borrow, c.ok)
		}
	}
	if _, ok := card.RateAt("ml.g5.xlarge", at("2026-06-01T00:00:00Z")); ok {
		t.Error("an unpriced instance type has a rate")
	}
	// The month's guarantee weight sums the price in force each hour.
	nov := MonthOf(at("2026-11-03T00:00:00Z"))
	want := int64(14*24+12)*9832 + int64(15*24+12)*9000
	if got := card.priceOver("ml.p5.48xlarge", nov.From, nov.To); got.Cmp(big.NewRat(want, 1)) != 0 {
		t.Errorf("priceOver(November) = %s, want %d", got, want)
	}
	// Per second: 90 minutes at 98.32 then 30 at 90.00.
	if got, want := card.priceOver("ml.p5.48xlarge", at("2026-11-15T10:30:00Z"), at("2026-11-15T12:30:00Z")), big.NewRat(3*9832+9000, 2); got.Cmp(want) != 0 {
		t.Errorf("priceOver(10:30-12:30) = %s, want %s", got, want)
	}
}

func TestRateCardErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{"currency": "usd", "rates": [{"instance_type": "a", "effective_from": "2026-01-01", "hourly": "1"}]}`, "three-letter"},
		{`{"currency": "USD", "rates": []}`, "lists no rates"},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "2026-01-01", "hourly": "1.001"}]}`, `rates[0] (a): hourly: amount "1.001" has more than 2 decimal digits`},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "Jan 1", "hourly": "1"}]}`, "effective_from: \"Jan 1\" is not a date"},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "2026-01-01T10:30:00Z", "hourly": "1"}]}`, "not on the hour"},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "2026-01-01", "hourly": "-1"}]}`, "negative"},
		{`{"currency": "USD", "rates": [{"instance_type": "", "effective_from": "2026-01-01", "hourly": "1"}]}`, "instance_type is empty"},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "2026-01-01", "hourly": "1"},
		   {"instance_type": "a", "effective_from": "2026-01-01", "hourly": "2"}]}`, "rates[1] (a): rates[0] already prices a"},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "2026-01-01", "hourly": "1", "price": 3}]}`, "unknown field \"price\""},
		{`{"currency": "USD", "rates": [{"instance_type": "a", "effective_from": "2026-01-01"}]}`, "hourly: is empty"},
	} {
		_, err := ParseRateCard([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseRateCard(%s)\n error = %v\n want one containing %q", c.file, err, c.want)
		}
	}
	// Every problem at once.
	_, err := ParseRateCard([]byte(`{"currency": "US", "rates": [{"instance_type": "", "effective_from": "x", "hourly": "y"}]}`))
	if err == nil || strings.Count(err.Error(), ";") < 3 {
		t.Errorf("want all four problems reported together, got %v", err)
	}
}
