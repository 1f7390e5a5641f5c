package workflow

import (
	"reflect"
	"testing"
)

func TestCheckCapacity(t *testing.T) {
	const p5, g5, trn = "ml.p5.48xlarge", "ml.g5.8xlarge", "ml.trn1.32xlarge"
	tests := []struct {
		name      string
		inventory map[string]int
		committed []Capacity
		requested []Capacity
		want      []CapacityRow
		wantOK    bool
	}{
		{
			name:      "fits with room to spare",
			inventory: map[string]int{p5: 8},
			committed: []Capacity{{p5, 4}},
			requested: []Capacity{{p5, 2}},
			want:      []CapacityRow{{p5, 8, 4, 2, 6, true, 0}},
			wantOK:    true,
		},
		{
			name:      "fits exactly",
			inventory: map[string]int{p5: 8},
			committed: []Capacity{{p5, 3}, {p5, 3}},
			requested: []Capacity{{p5, 2}},
			want:      []CapacityRow{{p5, 8, 6, 2, 8, true, 0}},
			wantOK:    true,
		},
		{
			name:      "one over",
			inventory: map[string]int{p5: 8},
			committed: []Capacity{{p5, 6}},
			requested: []Capacity{{p5, 3}},
			want:      []CapacityRow{{p5, 8, 6, 3, 9, false, 0}},
			wantOK:    false,
		},
		{
			name:      "type not in the inventory",
			inventory: map[string]int{p5: 8},
			requested: []Capacity{{trn, 1}},
			want:      []CapacityRow{{p5, 8, 0, 0, 0, true, 0}, {trn, 0, 0, 1, 1, false, 0}},
			wantOK:    false,
		},
		{
			name:      "several types, one over, rows sorted",
			inventory: map[string]int{p5: 4, g5: 16, trn: 2},
			committed: []Capacity{{g5, 10}, {p5, 2}},
			requested: []Capacity{{p5, 2}, {g5, 8}},
			want:      []CapacityRow{{g5, 16, 10, 8, 18, false, 0}, {p5, 4, 2, 2, 4, true, 0}, {trn, 2, 0, 0, 0, true, 0}},
			wantOK:    false,
		},
		{
			name:      "an existing over-commitment does not block an unrelated request",
			inventory: map[string]int{p5: 2, g5: 4},
			committed: []Capacity{{p5, 4}},
			requested: []Capacity{{g5, 4}},
			want:      []CapacityRow{{g5, 4, 0, 4, 4, true, 0}, {p5, 2, 4, 0, 4, false, 0}},
			wantOK:    true,
		},
		{
			name:      "a request onto an over-committed type is blocked",
			inventory: map[string]int{p5: 2},
			committed: []Capacity{{p5, 4}},
			requested: []Capacity{{p5, 1}},
			want:      []CapacityRow{{p5, 2, 4, 1, 5, false, 0}},
			wantOK:    false,
		},
		{
			name:      "the same type twice in a request is summed",
			inventory: map[string]int{p5: 4},
			requested: []Capacity{{p5, 2}, {p5, 3}},
			want:      []CapacityRow{{p5, 4, 0, 5, 5, false, 0}},
			wantOK:    false,
		},
		{
			name:      "case and spaces of instance types do not matter",
			inventory: map[string]int{"ML.P5.48XLARGE": 4},
			committed: []Capacity{{" ml.p5.48xlarge", 1}},
			requested: []Capacity{{"Ml.P5.48xlarge", 1}},
			want:      []CapacityRow{{p5, 4, 1, 1, 2, true, 0}},
			wantOK:    true,
		},
		{
			name:   "nothing at all",
			want:   []CapacityRow{},
			wantOK: true,
		},
		{
			name:      "empty inventory",
			requested: []Capacity{{p5, 1}},
			want:      []CapacityRow{{p5, 0, 0, 1, 1, false, 0}},
			wantOK:    false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := CheckCapacity(tt.inventory, tt.committed, tt.requested)
			if !reflect.DeepEqual(r.Rows, tt.want) {
				t.Errorf("Rows =\n%+v\nwant\n%+v", r.Rows, tt.want)
			}
			if r.OK() != tt.wantOK {
				t.Errorf("OK() = %v, want %v", r.OK(), tt.wantOK)
			}
		})
	}
}

func TestCheckCapacityOfTheExample(t *testing.T) {
	c := ExampleContract()
	inventory := map[string]int{"ml.p5.48xlarge": 4}
	if r := CheckCapacity(inventory, nil, c.Scheduling.Guaranteed); !r.OK() {
		t.Errorf("the example does not fit an empty cluster of 4: %+v", r)
	}
	if r := CheckCapacity(inventory, []Capacity{{"ml.p5.48xlarge", 3}}, c.Scheduling.Guaranteed); r.OK() {
		t.Errorf("the example fits next to 3 committed of 4: %+v", r)
	}
}
