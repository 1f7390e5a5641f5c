package web

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

// runTarget is where a snippet submits: the team namespace, its queue and
// the Kueue priority class a job labels itself with.
type runTarget struct {
	namespace, queue, priority, instance string
}

// runTypes is what the member page lists a connection lets the team run:
// per approved workload type, its kinds (provision's table, kinds.go),
// each with a kubectl snippet and, where the HyperPod CLI creates the
// kind, a `hyp create` one.
func runTypes(c workflow.Contract, t runTarget) []views.RunType {
	var out []views.RunType
	for _, w := range workflow.AllWorkloadTypes {
		if !slices.Contains(c.WorkloadTypes, w) {
			continue
		}
		rt := views.RunType{Type: string(w), Label: w.Label()}
		for _, k := range provision.KindsOf(w) {
			kubectl, cli := kindSnippets(k, t)
			rt.Kinds = append(rt.Kinds, views.RunKind{Kind: k.Kind, APIVersion: k.APIVersion(), Resource: k.Resource, Kubectl: kubectl, CLI: cli})
		}
		out = append(out, rt)
	}
	return out
}

// queueLabels are the labels rules 1 and 2 of the contract's admission
// policy want on a job (admission.go).
func queueLabels(t runTarget, indent string) string {
	return indent + provision.KueueQueueLabel + ": " + t.queue + "\n" + indent + provision.KueuePriorityClassLabel + ": " + t.priority
}

// kindSnippets are a kind's kubectl and HyperPod CLI snippets ("" for a
// kind the CLI does not create). The manifests follow each kind's source:
//   - PyTorchJob: Kubeflow's v1 API, container named "pytorch" (the
//     training operator's default container name); queue labels in
//     metadata.labels (Kueue, "Run a Kubeflow PyTorchJob").
//   - HyperPodPyTorchJob: the CLI's template
//     (github:aws/sagemaker-hyperpod-cli hyperpod-pytorch-job-template
//     v1_1/template.py: spec.replicaSpecs[].template, the labels in
//     metadata.labels) and `hyp create hyp-pytorch-job` (README.md,
//     --queue-name and --priority become those labels verbatim).
//   - JumpStartModel and InferenceEndpointConfig: the inference operator's
//     samples (same repository, helm_chart/HyperPodHelmChart/charts/
//     inference-operator/config/samples/v1_deepseek_model15b.yaml and
//     v1_s3_modeldeployment.yaml) and `hyp create hyp-jumpstart-endpoint`,
//     `hyp create hyp-custom-endpoint` (README.md; cli/commands/inference.py).
//   - Workspace and WorkspaceConnection: AWS, "Create and manage spaces"
//     (https://docs.aws.amazon.com/sagemaker/latest/dg/create-manage-spaces.html)
//     and `hyp create hyp-space`, `hyp create hyp-space-access` (README.md;
//     cli/commands/space.py, space_access.py); the connection is the
//     extension API's POST (github:jupyter-infra/jupyter-k8s Makefile,
//     bearer-token: kubectl create --raw .../workspaceconnections).
func kindSnippets(k provision.WorkloadKind, t runTarget) (kubectl, cli string) {
	ns := t.namespace
	head := func(name string) string {
		return fmt.Sprintf("kubectl -n %s create -f - <<'EOF'\napiVersion: %s\nkind: %s\nmetadata:\n  %s", ns, k.APIVersion(), k.Kind, name)
	}
	switch k.Kind {
	case "Job":
		return head("generateName: train-") + "\n  labels:\n" + queueLabels(t, "    ") + `
spec:
  suspend: true   # Kueue admits it when your quota allows
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: <your training image>
EOF`, ""
	case "PyTorchJob":
		return head("generateName: pytorch-") + "\n  labels:\n" + queueLabels(t, "    ") + `
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - name: pytorch
            image: <your training image>
EOF`, ""
	case "HyperPodPyTorchJob":
		return head("name: my-training-job") + "\n  labels:\n" + queueLabels(t, "    ") + `
spec:
  replicaSpecs:
  - name: pod
    replicas: 1
    template:
      metadata:
        labels:
` + queueLabels(t, "          ") + `
      spec:
        containers:
        - name: pytorch-job-container
          image: <your training image>
EOF`, strings.Join([]string{
				"hyp create hyp-pytorch-job \\",
				"  --job-name my-training-job \\",
				"  --image <your training image> \\",
				"  --namespace " + ns + " \\",
				"  --queue-name " + t.queue + " \\",
				"  --priority " + t.priority + " \\",
				"  --instance-type " + t.instance + " \\",
				"  --node-count 1",
			}, "\n")
	case "JumpStartModel":
		return head("name: my-jumpstart-model") + `
spec:
  sageMakerEndpoint:
    name: my-endpoint
  model:
    modelHubName: SageMakerPublicHub
    modelId: <JumpStart model id>
  server:
    instanceType: ` + t.instance + `
EOF`, strings.Join([]string{
				"hyp create hyp-jumpstart-endpoint \\",
				"  --model-id <JumpStart model id> \\",
				"  --instance-type " + t.instance + " \\",
				"  --endpoint-name my-endpoint \\",
				"  --namespace " + ns,
			}, "\n")
	case "InferenceEndpointConfig":
		return head("name: my-model-deployment") + `
spec:
  modelName: my-model
  endpointName: my-endpoint
  instanceType: ` + t.instance + `
  modelSourceConfig:
    modelSourceType: s3
    s3Storage:
      bucketName: <your model bucket>
      region: <its region>
    modelLocation: <prefix of the model>
  worker:
    image: <your inference image>
    modelInvocationPort:
      containerPort: 8080
    modelVolumeMount:
      name: model-weights
      mountPath: /opt/ml/model
EOF`, strings.Join([]string{
				"hyp create hyp-custom-endpoint \\",
				"  --endpoint-name my-endpoint \\",
				"  --model-name my-model \\",
				"  --model-source-type s3 \\",
				"  --model-location <prefix of the model> \\",
				"  --s3-bucket-name <your model bucket> \\",
				"  --s3-region <its region> \\",
				"  --instance-type " + t.instance + " \\",
				"  --image-uri <your inference image> \\",
				"  --container-port 8080 \\",
				"  --namespace " + ns,
			}, "\n")
	case "Workspace":
		return head("name: my-space") + `
spec:
  displayName: My Space
  desiredStatus: Running
EOF`, fmt.Sprintf("hyp create hyp-space \\\n  --name my-space \\\n  --display-name \"My Space\" \\\n  --namespace %s", ns)
	case "WorkspaceConnection":
		return fmt.Sprintf(`kubectl create --raw /apis/%s/namespaces/%s/%s -f - <<'EOF'
{"apiVersion": "%s", "kind": "%s", "metadata": {"namespace": "%s"},
 "spec": {"workspaceName": "my-space", "workspaceConnectionType": "web-ui"}}
EOF`, k.APIVersion(), ns, k.Resource, k.APIVersion(), k.Kind, ns),
			fmt.Sprintf("hyp create hyp-space-access --name my-space --namespace %s --connection-type web-ui", ns)
	}
	return fmt.Sprintf("kubectl -n %s create -f <your %s manifest>", ns, k.Kind), ""
}
