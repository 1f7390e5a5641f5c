package collect

import (
	"strings"
	"sync"
)

// internTable keeps one copy of each value from a small set that many
// followed objects repeat, so that they share it: the API server's answer
// is decoded object by object, and each pod of a namespace arrives with its
// own copy of the namespace's name, its node's, its priority class's and
// its phase's. At 50,000 pods the namespaces and node names alone were
// about 1.8 MiB of the collector's live heap (BenchmarkFlush50kPods's heap
// profile: 24 and 8 bytes a pod).
//
// It is bounded: past internMax distinct values it starts again from
// empty (the values already shared stay shared; later objects get new
// shared copies), so a value that is not from a small set costs at most
// one table's worth of memory. It is not the unique package's: a string
// taken from a unique.Handle does not keep its entry alive, so after each
// GC the next object would make a new copy.
type internTable[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// internMax bounds each table: above any cluster's count of namespaces,
// nodes, priority classes and flavors.
const internMax = 1 << 14

// of returns the shared value for k, made by mk the first time k is seen:
// mk returns the value and the key to keep it under (equal to k, but not
// holding on to the object k was read from).
func (t *internTable[K, V]) of(k K, mk func() (K, V)) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[k]; ok {
		return v
	}
	if t.m == nil || len(t.m) >= internMax {
		t.m = map[K]V{}
	}
	k, v := mk()
	t.m[k] = v
	return v
}

var strs internTable[string, string]

// intern returns the shared copy of s. Only for values from a small set
// (names of namespaces, nodes, priority classes, flavors, phases,
// condition types and reasons), never for a pod's own name or UID.
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(strs.of(string(s), func() (string, string) {
		c := strings.Clone(string(s)) // s may point into a larger buffer
		return c, c
	}))
}
