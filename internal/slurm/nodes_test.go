package slurm

import (
	"reflect"
	"testing"
)

func TestGRESGPUs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"(null)", 0}, {"", 0}, {"gpu:8", 8}, {"gpu:h100:8(S:0-1)", 8}, {"gpu:a100:2,gpu:t4:1", 3},
		{"gpu:4,shard:16", 4}, {"mps:100", 0}, {"gpu", 1}, {"gpu:a100:2(S:0),gpu:t4:1(S:1)", 3}, {"gpu:no_consume:2", 2}, {"gpu:1K", 1024},
	} {
		got, err := GRESGPUs(c.in)
		if err != nil || got != c.want {
			t.Errorf("GRESGPUs(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"gpu:a100", "gpu:x:-1"} {
		if _, err := GRESGPUs(bad); err == nil {
			t.Errorf("GRESGPUs(%q): no error", bad)
		}
	}
}

// TestUsableState: the base states of sinfo(1)'s NODE STATE CODES that run
// work are usable unless a flag says the node takes no new work.
func TestUsableState(t *testing.T) {
	usable := []string{"idle", "mixed", "allocated", "allocated+", "completing", "planned", "mixed-", "idle-"}
	unusable := []string{"drained", "draining", "down", "down*", "fail", "failing", "future", "inval", "maint",
		"reboot_issued", "reboot_requested", "reserved", "unknown", "idle*", "idle~", "idle#", "idle!", "idle%",
		"idle$", "idle@", "mixed^", "allocated*", "drained*", "", "something-new"}
	for _, s := range usable {
		if !UsableState(s) {
			t.Errorf("UsableState(%q) = false", s)
		}
	}
	for _, s := range unusable {
		if UsableState(s) {
			t.Errorf("UsableState(%q) = true", s)
		}
	}
}

func TestParseNodes(t *testing.T) {
	// As the test bed's sinfo 22.05 prints it (sinfo --all --Node
	// --noheader --format=%N|%R|%G|%T), before and after
	// `scontrol update nodename=hp-gpu-1 state=drain`, with a second
	// partition and nodes of other states added.
	out := "hp-gpu-1|gpu|gpu:8|drained\nhp-gpu-2|gpu|gpu:h100:8(S:0-1)|MIXED\nhp-gpu-2|debug|gpu:h100:8(S:0-1)|mixed\nhp-cpu-1|cpu|(null)|idle*\n\n"
	got, err := ParseNodes([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "hp-gpu-1", Partition: "gpu", GPUs: 8, State: "drained"},
		{Name: "hp-gpu-2", Partition: "gpu", GPUs: 8, State: "mixed", Usable: true},
		{Name: "hp-gpu-2", Partition: "debug", GPUs: 8, State: "mixed", Usable: true},
		{Name: "hp-cpu-1", Partition: "cpu", State: "idle*"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseNodes:\n got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"hp-gpu-1|gpu|gpu:8\n", "a|b|gpu:x:y|idle\n"} {
		if _, err := ParseNodes([]byte(bad)); err == nil {
			t.Errorf("ParseNodes(%q): no error", bad)
		}
	}
	if n, err := ParseNodes(nil); err != nil || len(n) != 0 {
		t.Errorf("ParseNodes(empty) = %v, %v", n, err)
	}
}

// TestCapacity: each node counts once per instance type, usable only when
// every partition line says so; unmapped partitions count nothing. The
// oracle is the node list counted by hand below.
func TestCapacity(t *testing.T) {
	nodes := []Node{
		{Name: "a", Partition: "gpu", GPUs: 8, Usable: true},
		{Name: "a", Partition: "gpu-long", GPUs: 8, Usable: true}, // same type: once
		{Name: "b", Partition: "gpu", GPUs: 8, Usable: false},     // drained
		{Name: "c", Partition: "gpu", GPUs: 8, Usable: true},
		{Name: "c", Partition: "gpu-long", GPUs: 8, Usable: false}, // one line says not usable
		{Name: "d", Partition: "g5", GPUs: 1, Usable: true},
		{Name: "e", Partition: "unmapped", GPUs: 4, Usable: true},
	}
	types := map[string]string{"gpu": "ml.p5.48xlarge", "gpu-long": "ml.p5.48xlarge", "g5": "ml.g5.8xlarge"}
	got := Capacity(nodes, types)
	want := []TypeCapacity{
		{InstanceType: "ml.g5.8xlarge", Nodes: 1, Usable: 1, GPUs: 1},
		{InstanceType: "ml.p5.48xlarge", Nodes: 3, Usable: 1, GPUs: 8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Capacity:\n got %+v\nwant %+v", got, want)
	}
	if got := Capacity(nodes, nil); len(got) != 0 {
		t.Errorf("Capacity without partition types = %+v", got)
	}
}
