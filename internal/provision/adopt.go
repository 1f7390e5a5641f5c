package provision

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelHyperPodManagedQueue is the label HyperPod task governance puts on
// the namespaces it creates (hyperpod-ns-<team>), with the value "true":
// "SageMaker created namespaces have custom label attached, indicating that
// the namespace is SageMaker managed" (aws/sagemaker-hyperpod-cli:
// src/sagemaker/hyperpod/cli/clients/kubernetes_client.py,
// get_sagemaker_managed_namespace, which checks
// SAGEMAKER_MANAGED_QUEUE_LABEL == "true";
// src/sagemaker/hyperpod/cli/constants/command_constants.py).
const LabelHyperPodManagedQueue = "sagemaker.amazonaws.com/sagemaker-managed-queue"

// ForeignNamespace says whether a namespace with these labels was created
// by neither HyperPod task governance (LabelHyperPodManagedQueue=true) nor
// the portal for this team (LabelManagedBy=ManagedBy and LabelTeam=team).
// The portal takes such a namespace over (a default-deny NetworkPolicy, a
// quota, RoleBindings, and later the removal of every other RoleBinding in
// it) only when an admin adopted it explicitly at approval (issue 10 item
// 14). A portal namespace of another team counts as foreign too.
func ForeignNamespace(labels map[string]string, team string) bool {
	if labels[LabelHyperPodManagedQueue] == "true" {
		return false
	}
	return labels[LabelManagedBy] != ManagedBy || labels[LabelTeam] != team
}

// NamespaceCheck is what the cluster says of a plan's namespace before
// approval: whether it exists, and whether it is foreign (ForeignNamespace)
// and so needs an admin's adoption.
type NamespaceCheck struct {
	Namespace string
	Exists    bool
	Foreign   bool
}

// CheckNamespace reads the plan's namespace, writing nothing.
func (a *Applier) CheckNamespace(ctx context.Context, p Plan) (NamespaceCheck, error) {
	out := NamespaceCheck{Namespace: p.Namespace}
	live, err := a.Client.Resource(namespacesGVR).Get(ctx, p.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return out, nil
	case err != nil:
		return out, fmt.Errorf("provision: read namespace %s: %w", p.Namespace, err)
	}
	out.Exists, out.Foreign = true, ForeignNamespace(live.GetLabels(), p.Team)
	return out, nil
}

// Adopting returns p with its namespace marked as adopted by an admin when
// ns is that namespace (see Object.Adopt); otherwise p unchanged. The mark
// is not part of the plan's YAML or Hash.
func (p Plan) Adopting(ns string) Plan {
	if ns == "" || ns != p.Namespace {
		return p
	}
	objs := make([]Object, len(p.Objects))
	copy(objs, p.Objects)
	for i := range objs {
		if objs[i].Kind == "Namespace" && objs[i].Name == ns {
			objs[i].Adopt = true
		}
	}
	p.Objects = objs
	return p
}

// foreignNamespaceError refuses to take over a namespace nobody adopted.
func foreignNamespaceError(ns, team string) error {
	return permanent(fmt.Errorf("namespace %s exists and was created neither by the portal for team %s nor by HyperPod task governance; "+
		"the portal takes it over only when an admin adopts it explicitly on the approval page. The job stops here: "+
		"have the team file a request naming another namespace (or naming this one again, whose approval offers the adoption)", ns, team))
}
