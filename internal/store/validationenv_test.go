package store_test

import (
	"testing"
	"time"
)

// TestValidationEnvReportsAnOutage: a lookup the database cannot answer
// fails closed (the owner passes only to be reported, the namespace and the
// role count as taken) and Unavailable says so, so a caller answers 503
// instead of blaming the input. With the database up, Unavailable is nil.
func TestValidationEnvReportsAnOutage(t *testing.T) {
	db, _ := openDB(t, true)
	up := db.ValidationEnv(t.Context(), time.Now(), 0, nil)
	if up.OwnerExists("nobody@example.test") || up.NamespaceTaken("hyperpod-ns-red") || up.RoleTaken("arn:aws:iam::111122223333:role/x") {
		t.Error("an empty database reports an owner or a claim")
	}
	if err := up.Unavailable(); err != nil {
		t.Errorf("Unavailable with the database up = %v", err)
	}

	down := db.ValidationEnv(t.Context(), time.Now(), 0, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := down.Unavailable(); err != nil {
		t.Errorf("Unavailable before any lookup = %v", err)
	}
	if !down.NamespaceTaken("hyperpod-ns-red") || !down.RoleTaken("arn:aws:iam::111122223333:role/x") {
		t.Error("an unanswered claim lookup lets the name through")
	}
	if !down.OwnerExists("nobody@example.test") {
		t.Error("an unanswered owner lookup is reported as a missing owner")
	}
	if err := down.Unavailable(); err == nil {
		t.Error("Unavailable = nil after lookups failed")
	}
}
