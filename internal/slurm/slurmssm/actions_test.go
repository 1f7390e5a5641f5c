package slurmssm_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/slurm/slurmssm"
)

// TestActionsListEveryCalledMethod: the portal's IAM policy is generated
// from awsprov.Actions; every SSM and SageMaker call the transport makes is
// there, and so is the data channel's ssmmessages:OpenDataChannel.
func TestActionsListEveryCalledMethod(t *testing.T) {
	for _, tc := range []struct {
		api    reflect.Type
		prefix string
	}{
		{reflect.TypeFor[slurmssm.SessionAPI](), "ssm:"},
		{reflect.TypeFor[slurmssm.NodesAPI](), "sagemaker:"},
	} {
		for i := range tc.api.NumMethod() {
			if a := tc.prefix + tc.api.Method(i).Name; !slices.Contains(awsprov.Actions, a) {
				t.Errorf("awsprov.Actions lacks %s, which %s calls", a, tc.api.Name())
			}
		}
	}
	if !slices.Contains(awsprov.Actions, "ssmmessages:OpenDataChannel") {
		t.Error("awsprov.Actions lacks ssmmessages:OpenDataChannel, which opening the session's data channel needs")
	}
}
