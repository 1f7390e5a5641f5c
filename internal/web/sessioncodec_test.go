package web

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"

	"github.com/hyperpod-governance/portal/internal/workflow"
)

// The session codec encodes the same session to the same bytes every time
// (the store's refresh granularity compares them), decodes what it encodes,
// re-encodes a decoded session to the bytes it came from, and still decodes
// what scs.GobCodec wrote before it.
func TestSessionCodecIsDeterministic(t *testing.T) {
	deadline := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	values := map[string]any{
		csrfKey: "token-0123456789",
		sessUser: sessionUser{UserID: 7, Subject: "s", Email: "a@example.test", Name: "A", Roles: []workflow.Role{workflow.RoleAdmin},
			Memberships: []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}}, Groups: []string{"g1", "g2"},
			Tokens: []byte{1, 2, 3}, CheckedAt: time.Now()},
	}
	for i := range 8 {
		values[fmt.Sprintf("k%d", i)] = fmt.Sprint(i)
	}
	var c sessionCodec
	first, err := c.Encode(deadline, values)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		b, err := c.Encode(deadline, values)
		if err != nil || !bytes.Equal(b, first) {
			t.Fatalf("encoding %d differs from the first (%v)", i+2, err)
		}
	}
	d, got, err := c.Decode(first)
	if err != nil || !d.Equal(deadline) || len(got) != len(values) {
		t.Fatalf("Decode = %v, %d values, %v", d, len(got), err)
	}
	if su := got[sessUser].(sessionUser); su.Email != "a@example.test" || !su.CheckedAt.Equal(values[sessUser].(sessionUser).CheckedAt) {
		t.Errorf("decoded user = %+v", su)
	}
	if again, _ := c.Encode(d, got); !bytes.Equal(again, first) {
		t.Error("a decoded session re-encodes to other bytes")
	}
	old, err := scs.GobCodec{}.Encode(deadline, values)
	if err != nil {
		t.Fatal(err)
	}
	if d, got, err := c.Decode(old); err != nil || !d.Equal(deadline) || !reflect.DeepEqual(got[csrfKey], values[csrfKey]) {
		t.Errorf("decoding GobCodec's data = %v, %v, %v", d, got, err)
	}
}
