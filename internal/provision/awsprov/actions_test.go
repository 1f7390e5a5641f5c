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
