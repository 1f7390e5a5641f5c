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

// TestSessionDecodeCache: data already decoded once are not decoded again,
// each caller gets values of its own (changing one result changes no later
// one), other bytes decode to their own values, and the cache is bounded.
func TestSessionDecodeCache(t *testing.T) {
	su := sessionUser{UserID: 7, Email: "owner.red@example.test", Roles: []workflow.Role{workflow.RoleAdmin},
		Memberships: []workflow.Membership{{Team: "red", Role: workflow.TeamOwner}}, Groups: []string{"red-owners"},
		Tokens: []byte("sealed")}
	deadline := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	b, err := sessionCodec{}.Encode(deadline, map[string]any{sessUser: su, csrfKey: "token-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := (sessionCodec{}).Decode(b); err != nil { // decoded, and kept
		t.Fatal(err)
	}
	hits := decodedSessions.hits.Load()
	_, first, err := sessionCodec{}.Decode(b) // from the cache
	if err != nil {
		t.Fatal(err)
	}
	if decodedSessions.hits.Load() <= hits {
		t.Error("the same bytes were decoded again, not taken from the cache")
	}
	got := first[sessUser].(sessionUser)
	got.Roles[0], got.Memberships[0].Team, got.Groups[0] = "changed", "changed", "changed"
	// The sealed tokens are shared, never written in place: an append
	// must not reach the cache's bytes (copyValues clips them).
	if extended := append(got.Tokens, "-more"...); string(extended) != "sealed-more" {
		t.Fatalf("append = %q", extended)
	}
	first[csrfKey] = "changed"
	dl, second, err := sessionCodec{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if again := second[sessUser].(sessionUser); !dl.Equal(deadline) || second[csrfKey] != "token-1" ||
		again.Roles[0] != workflow.RoleAdmin || again.Memberships[0].Team != "red" || again.Groups[0] != "red-owners" ||
		string(again.Tokens) != "sealed" || cap(again.Tokens) != len(again.Tokens) {
		t.Errorf("second decode = %v %+v; want the encoded session, untouched by changes to the first result", dl, second)
	}
	other, _ := sessionCodec{}.Encode(deadline, map[string]any{sessUser: su, csrfKey: "token-2"})
	if _, v, _ := (sessionCodec{}).Decode(other); v[csrfKey] != "token-2" {
		t.Errorf("other bytes decoded to %v", v[csrfKey])
	}
	for i := range decodedSessionsMax + 5 {
		b, _ := sessionCodec{}.Encode(deadline, map[string]any{csrfKey: fmt.Sprint(i)})
		sessionCodec{}.Decode(b)
	}
	decodedSessions.mu.Lock()
	n := len(decodedSessions.m)
	decodedSessions.mu.Unlock()
	if n > decodedSessionsMax {
		t.Errorf("%d decoded sessions kept, want at most %d", n, decodedSessionsMax)
	}
}

// A decoded session encoded again unchanged gives back the bytes it was
// decoded from without encoding (scs encodes every session on every
// request); once anything in it changes, it is encoded anew.
func TestSessionCodecReusesUnchangedBytes(t *testing.T) {
	deadline := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	var c sessionCodec
	b, err := c.Encode(deadline, map[string]any{csrfKey: "t1", sessUser: sessionUser{UserID: 7, Roles: []workflow.Role{workflow.RoleAdmin}}})
	if err != nil {
		t.Fatal(err)
	}
	_, values, err := c.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	reused := decodedSessions.reused.Load()
	again, err := c.Encode(deadline, values)
	if err != nil || !bytes.Equal(again, b) || decodedSessions.reused.Load() != reused+1 {
		t.Fatalf("unchanged: same bytes %v, reused %d -> %d, %v", bytes.Equal(again, b), reused, decodedSessions.reused.Load(), err)
	}
	for name, change := range map[string]func(m map[string]any){
		"a new key":        func(m map[string]any) { m["flash"] = "Saved." },
		"a changed value":  func(m map[string]any) { m[csrfKey] = "t2" },
		"a changed role":   func(m map[string]any) { su := m[sessUser].(sessionUser); su.Roles[0] = workflow.RoleReviewer },
		"another deadline": nil,
	} {
		_, values, err := c.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		dl := deadline
		if change != nil {
			change(values)
		} else {
			dl = dl.Add(time.Hour)
		}
		reused := decodedSessions.reused.Load()
		got, err := c.Encode(dl, values)
		if err != nil || bytes.Equal(got, b) || decodedSessions.reused.Load() != reused {
			t.Errorf("%s: encoded to the old bytes %v, reused %d -> %d, %v", name, bytes.Equal(got, b), reused, decodedSessions.reused.Load(), err)
		}
	}
}

// sessionUser.equal, which lets an unchanged session skip its encoding,
// compares every field: each field changed in turn makes the users
// differ. A field added to sessionUser and not to equal fails here.
func TestSessionUserEqualSeesEveryField(t *testing.T) {
	base := sessionUser{UserID: 7, Subject: "s", Email: "e@x", Name: "n", Roles: []workflow.Role{workflow.RoleAdmin},
		Memberships: []workflow.Membership{{Team: "a", Role: workflow.TeamOwner}}, Groups: []string{"g"}, DirName: "d",
		Tokens: []byte{1}, CheckedAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	if !base.equal(copyValues(map[string]any{"u": base})["u"].(sessionUser)) {
		t.Fatal("a copy is not equal")
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		copied := copyValues(map[string]any{"u": base})["u"].(sessionUser)
		f := reflect.ValueOf(&copied).Elem().Field(i)
		switch {
		case f.Type() == reflect.TypeOf(time.Time{}):
			f.Set(reflect.ValueOf(base.CheckedAt.Add(time.Second)))
		case f.Kind() == reflect.Int64:
			f.SetInt(f.Int() + 1)
		case f.Kind() == reflect.String:
			f.SetString(f.String() + "x")
		case f.Kind() == reflect.Slice:
			f.Set(reflect.Append(f, reflect.Zero(f.Type().Elem())))
		default:
			t.Fatalf("field %s of kind %s: teach this test (and sessionUser.equal) about it", typ.Field(i).Name, f.Kind())
		}
		if base.equal(copied) || copied.equal(base) {
			t.Errorf("a changed %s is equal", typ.Field(i).Name)
		}
	}
}

// TestCopyValuesSharesTokensReadOnly: the copy shares the sealed tokens'
// bytes, clipped, so that an append to the copy's never writes into the
// array the cache holds.
func TestCopyValuesSharesTokensReadOnly(t *testing.T) {
	tok := make([]byte, 6, 64)
	copy(tok, "sealed")
	out := copyValues(map[string]any{sessUser: sessionUser{Tokens: tok}})
	got := out[sessUser].(sessionUser).Tokens
	if string(got) != "sealed" || cap(got) != len(got) {
		t.Fatalf("copied tokens %q with cap %d, want them clipped", got, cap(got))
	}
	_ = append(got, 'x')
	if tok[:7][6] == 'x' {
		t.Error("an append to the copy's tokens wrote into the cache's array")
	}
}
