package usage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// RateCard is the price of an instance-hour per instance type over time, in
// one currency. It is read from a file (--rate-card): prices change, and a
// month is charged at the prices in force each hour.
type RateCard struct {
	Currency string
	// Demo marks made-up prices (the one `make run` uses); every page that
	// shows money from it says so.
	Demo  bool
	Note  string
	rates map[string][]Rate // by instance type, sorted by From
}

// Rate is one instance type's price from From until the next rate of the
// type takes over.
type Rate struct {
	InstanceType string
	From         time.Time
	Hourly       Money // per instance-hour of guaranteed (or unsplit) use
	// Borrowed is the price of an instance-hour held above the team's
	// guarantee (borrowed from idle capacity); Hourly when the file sets none.
	Borrowed Money
}

// rateCardFile is the file's shape:
//
//	{"currency": "USD", "demo": false, "note": "...",
//	 "rates": [{"instance_type": "ml.p5.48xlarge", "effective_from": "2026-01-01",
//	            "hourly": "98.32", "borrowed_hourly": "120.00"}]}
type rateCardFile struct {
	Currency string         `json:"currency"`
	Demo     bool           `json:"demo"`
	Note     string         `json:"note"`
	Rates    []rateFileItem `json:"rates"`
}

type rateFileItem struct {
	InstanceType   string `json:"instance_type"`
	EffectiveFrom  string `json:"effective_from"`
	Hourly         string `json:"hourly"`
	BorrowedHourly string `json:"borrowed_hourly"`
}

// ParseRateCard reads a rate card file and reports every problem in it at
// once, each naming the entry it is in.
func ParseRateCard(data []byte) (*RateCard, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f rateCardFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("rate card: not the expected JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("rate card: more than one JSON value in the file")
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if err := validCurrency(f.Currency); err != nil {
		bad("currency: %v", err)
	}
	if len(f.Rates) == 0 {
		bad("rates: the file lists no rates")
	}
	card := &RateCard{Currency: f.Currency, Demo: f.Demo, Note: f.Note, rates: map[string][]Rate{}}
	seen := map[string]int{}
	for i, it := range f.Rates {
		where := fmt.Sprintf("rates[%d]", i)
		if it.InstanceType != "" {
			where += " (" + it.InstanceType + ")"
		}
		if strings.TrimSpace(it.InstanceType) == "" {
			bad("%s: instance_type is empty", where)
		}
		from, err := parseEffective(it.EffectiveFrom)
		if err != nil {
			bad("%s: effective_from: %v", where, err)
		}
		r := Rate{InstanceType: it.InstanceType, From: from}
		if err == nil {
			key := it.InstanceType + "@" + from.Format(time.RFC3339)
			if j, dup := seen[key]; dup {
				bad("%s: rates[%d] already prices %s from %s", where, j, it.InstanceType, it.EffectiveFrom)
			}
			seen[key] = i
		}
		if r.Hourly, err = parsePrice(it.Hourly, f.Currency); err != nil {
			bad("%s: hourly: %v", where, err)
		}
		r.Borrowed = r.Hourly
		if it.BorrowedHourly != "" {
			if r.Borrowed, err = parsePrice(it.BorrowedHourly, f.Currency); err != nil {
				bad("%s: borrowed_hourly: %v", where, err)
			}
		}
		card.rates[r.InstanceType] = append(card.rates[r.InstanceType], r)
	}
	if problems != nil {
		return nil, errors.New("rate card: " + strings.Join(problems, "; "))
	}
	for _, rs := range card.rates {
		sort.Slice(rs, func(i, j int) bool { return rs[i].From.Before(rs[j].From) })
	}
	return card, nil
}

func parseEffective(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, errors.New("is empty (a date such as 2026-01-01, or an RFC 3339 time on the hour)")
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date such as 2026-01-01 or an RFC 3339 time", s)
	}
	if !HourStart(t).Equal(t) {
		return time.Time{}, fmt.Errorf("%q is not on the hour (prices change at hour boundaries)", s)
	}
	return t.UTC(), nil
}

func parsePrice(s, currency string) (Money, error) {
	if s == "" {
		return Money{}, errors.New("is empty (a decimal price per instance-hour such as 98.32)")
	}
	if validCurrency(currency) != nil {
		currency = "XXX"
	}
	m, err := ParseAmount(s, currency)
	if err != nil {
		return Money{}, err
	}
	if m.Minor < 0 {
		return Money{}, fmt.Errorf("%q is negative", s)
	}
	return m, nil
}

// RateAt is the rate of an instance type in force during the hour starting
// at hour: the latest whose From is not after it.
func (c *RateCard) RateAt(instanceType string, hour time.Time) (Rate, bool) {
	if c == nil {
		return Rate{}, false
	}
	rs := c.rates[instanceType]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].From.After(hour) })
	if i == 0 {
		return Rate{}, false
	}
	return rs[i-1], true
}

// Changes lists the times inside p (after its start, before its end) at
// which some instance type's rate changes, in order: hours between two of
// them are all billed at the same rates, so a chargeback may sum them first
// (store.DB.CostInputSummed).
func (c *RateCard) Changes(p Period) []time.Time {
	if c == nil {
		return nil
	}
	var out []time.Time
	for _, rs := range c.rates {
		for _, r := range rs {
			if r.From.After(p.From) && r.From.Before(p.To) {
				out = append(out, r.From)
			}
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return slices.CompactFunc(out, time.Time.Equal)
}

// rateIndex is RateAt's position, for grouping hours billed at one rate.
func (c *RateCard) rateIndex(instanceType string, hour time.Time) int {
	rs := c.rates[instanceType]
	return sort.Search(len(rs), func(i int) bool { return rs[i].From.After(hour) }) - 1
}

// Rates lists every rate, by instance type and date.
func (c *RateCard) Rates() []Rate {
	var out []Rate
	for _, t := range slices.Sorted(maps.Keys(c.rates)) {
		out = append(out, c.rates[t]...)
	}
	return out
}
