package web

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// A sign-in tells OnLogin who signed in, with their groups recorded by
// then (the review scheduler reads them); its failure does not fail the
// sign-in.
func TestOnLoginIsToldOfEachSignIn(t *testing.T) {
	var seen []string
	var groups [][]string
	var h *harness
	h = newHarness(t, false, func(o *Options) {
		o.OnLogin = func(ctx context.Context, email string) error {
			seen = append(seen, email)
			u, err := h.db.UserByEmail(ctx, email)
			if err != nil {
				return err
			}
			groups = append(groups, u.Groups)
			return errors.New("the review check failed")
		}
	})
	resp, _ := h.login(h.client(), "owner.red")
	if resp.StatusCode != 200 {
		t.Fatalf("sign-in with a failing OnLogin: %d", resp.StatusCode)
	}
	if !slices.Equal(seen, []string{"owner.red@example.test"}) || len(groups) != 1 || !slices.Contains(groups[0], "team-red-owners") {
		t.Errorf("OnLogin saw %v with groups %v; want owner.red with this sign-in's groups", seen, groups)
	}
}
