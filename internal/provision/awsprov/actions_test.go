package awsprov

import (
	"reflect"
	"slices"
	"testing"
)

func TestActionsListEveryCalledMethod(t *testing.T) {
	api := reflect.TypeFor[SageMakerAPI]()
	if api.NumMethod() == 0 {
		t.Fatal("SageMakerAPI has no methods")
	}
	for i := range api.NumMethod() {
		action := "sagemaker:" + api.Method(i).Name
		if !slices.Contains(Actions, action) {
			t.Errorf("Actions lacks %s, which SageMakerAPI calls", action)
		}
	}
	seen := map[string]bool{}
	for _, a := range Actions {
		if seen[a] {
			t.Errorf("Actions lists %s twice", a)
		}
		seen[a] = true
	}
}

func TestActionsListEveryIdentityStoreMethod(t *testing.T) {
	api := reflect.TypeFor[IdentityStoreAPI]()
	if api.NumMethod() == 0 {
		t.Fatal("IdentityStoreAPI has no methods")
	}
	for i := range api.NumMethod() {
		action := "identitystore:" + api.Method(i).Name
		if !slices.Contains(Actions, action) {
			t.Errorf("Actions lacks %s, which IdentityStoreAPI calls", action)
		}
	}
}

func TestActionsListEveryDataZoneMethod(t *testing.T) {
	api := reflect.TypeFor[DataZoneAPI]()
	if api.NumMethod() == 0 {
		t.Fatal("DataZoneAPI has no methods")
	}
	for i := range api.NumMethod() {
		action := "datazone:" + api.Method(i).Name
		if !slices.Contains(Actions, action) {
			t.Errorf("Actions lacks %s, which DataZoneAPI calls", action)
		}
	}
}

func TestActionsListEveryEKSMethod(t *testing.T) {
	api := reflect.TypeFor[EKSAPI]()
	if api.NumMethod() == 0 {
		t.Fatal("EKSAPI has no methods")
	}
	for i := range api.NumMethod() {
		action := "eks:" + api.Method(i).Name
		if !slices.Contains(Actions, action) {
			t.Errorf("Actions lacks %s, which EKSAPI calls", action)
		}
	}
}

func TestActionsListEveryDomainMethod(t *testing.T) {
	for _, tc := range []struct {
		api    reflect.Type
		prefix string
	}{
		{reflect.TypeFor[SageMakerDomainAPI](), "sagemaker:"},
		{reflect.TypeFor[SSOAdminAPI](), "sso:"}, // ssoadmin's IAM prefix
		{reflect.TypeFor[IAMAPI](), "iam:"},
	} {
		if tc.api.NumMethod() == 0 {
			t.Fatalf("%s has no methods", tc.api.Name())
		}
		for i := range tc.api.NumMethod() {
			action := tc.prefix + tc.api.Method(i).Name
			if !slices.Contains(Actions, action) {
				t.Errorf("Actions lacks %s, which %s calls", action, tc.api.Name())
			}
		}
	}
}

func TestActionsListEverySchedulerMethod(t *testing.T) {
	api := reflect.TypeFor[SchedulerAPI]()
	if api.NumMethod() == 0 {
		t.Fatal("SchedulerAPI has no methods")
	}
	for i := range api.NumMethod() {
		action := "sagemaker:" + api.Method(i).Name
		if !slices.Contains(Actions, action) {
			t.Errorf("Actions lacks %s, which SchedulerAPI calls", action)
		}
	}
}

func TestActionsListEveryClusterReadMethod(t *testing.T) {
	for _, tc := range []struct {
		api    reflect.Type
		prefix string
	}{
		{reflect.TypeFor[ClusterInfoAPI](), "sagemaker:"},
		{reflect.TypeFor[AddonAPI](), "eks:"},
		{reflect.TypeFor[VPCEndpointAPI](), "ec2:"},
	} {
		if tc.api.NumMethod() == 0 {
			t.Fatalf("%s has no methods", tc.api.Name())
		}
		for i := range tc.api.NumMethod() {
			action := tc.prefix + tc.api.Method(i).Name
			if !slices.Contains(Actions, action) {
				t.Errorf("Actions lacks %s, which %s calls", action, tc.api.Name())
			}
		}
	}
}
