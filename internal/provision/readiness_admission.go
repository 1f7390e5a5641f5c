package provision

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Kueue's configuration, as Kueue's own install ships it: the manager's
// Configuration is the file controller_manager_config.yaml of ConfigMap
// manager-config (sigs.k8s.io/kueue@v0.17.0
// config/components/manager/kustomization.yaml, configMapGenerator,
// disableNameSuffixHash), which config/default/kustomization.yaml puts in
// namespace kueue-system with namePrefix kueue-: kueue-system/
// kueue-manager-config. AWS's pages on the task governance add-on
// (sagemaker-hyperpod-eks-operate-console-ui-governance-setup.html and
// -upgrade.html, searched) do not say where the add-on keeps Kueue's
// configuration nor that it changes it, so the check reads Kueue's own
// place and says so when nothing is there.
const (
	KueueConfigNamespace = "kueue-system"
	KueueConfigMapName   = "kueue-manager-config"
	KueueConfigKey       = "controller_manager_config.yaml"
)

// KueueConfig is the part of Kueue's Configuration
// (config.kueue.x-k8s.io/v1beta2, apis/config/v1beta2/configuration_types.go)
// the admission rules depend on.
type KueueConfig struct {
	// ManageJobsWithoutQueueName: "If set to true, then those jobs will be
	// suspended and never started unless they are assigned a queue and
	// eventually admitted ... Defaults to false; therefore, those jobs are
	// not managed and if they are created unsuspended, they will start
	// immediately."
	ManageJobsWithoutQueueName bool `json:"manageJobsWithoutQueueName"`
	// ManagedJobsNamespaceSelector limits ManageJobsWithoutQueueName to
	// the namespaces it selects (default: all but kube-system and Kueue's
	// own, apis/config/v1beta2/defaults.go).
	ManagedJobsNamespaceSelector *metav1.LabelSelector `json:"managedJobsNamespaceSelector,omitempty"`
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// KueueConfiguration reads Kueue's configuration from
// KueueConfigNamespace/KueueConfigMapName; found is false when there is no
// such ConfigMap.
func (r *ClusterReader) KueueConfiguration(ctx context.Context) (cfg KueueConfig, found bool, err error) {
	u, err := r.Client.Resource(configMaps).Namespace(KueueConfigNamespace).Get(ctx, KueueConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return cfg, false, nil
	case err != nil:
		return cfg, false, fmt.Errorf("provision: read Kueue's configuration %s/%s: %w", KueueConfigNamespace, KueueConfigMapName, err)
	}
	text, _, _ := unstructured.NestedString(u.Object, "data", KueueConfigKey)
	if text == "" {
		return cfg, true, fmt.Errorf("provision: ConfigMap %s/%s has no %s", KueueConfigNamespace, KueueConfigMapName, KueueConfigKey)
	}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		return cfg, true, fmt.Errorf("provision: Kueue's configuration %s/%s: %w", KueueConfigNamespace, KueueConfigMapName, err)
	}
	return cfg, true, nil
}

// kueueConfigCheck: are jobs without a queue name managed by Kueue, and
// what that means for rule 1 (a job must carry the team's LocalQueue).
func kueueConfigCheck(ctx context.Context, src ReadinessSources) Check {
	c := Check{Name: CheckKueueConfig}
	if src.Kube == nil || src.Kube.Client == nil {
		c.Status, c.Detail = CheckUnknown, errNoCluster.Error()
		return c
	}
	mode := src.admissionMode()
	where := KueueConfigNamespace + "/" + KueueConfigMapName
	cfg, found, err := src.Kube.KueueConfiguration(ctx)
	unmanaged := fmt.Sprintf("Jobs without %s are then not managed by Kueue: created unsuspended, they start at once, outside every team's quota. "+
		"Rule 1 of the contracts (a job names the team's LocalQueue) is what keeps them in the queue", KueueQueueLabel)
	switch {
	case err != nil:
		c.Status, c.Detail = CheckUnknown, sentenceOf(err.Error())
		return c
	case !found:
		c.Detail = fmt.Sprintf("Kueue's configuration is not at %s (where Kueue's own install keeps it; AWS does not document where the task governance add-on keeps it), so Kueue's default is assumed: manageJobsWithoutQueueName false. %s", where, unmanaged)
	case !cfg.ManageJobsWithoutQueueName:
		c.Detail = fmt.Sprintf("Kueue's configuration (%s) leaves manageJobsWithoutQueueName false. %s", where, unmanaged)
	default:
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("Kueue's configuration (%s) sets manageJobsWithoutQueueName true: Kueue suspends a job without %s and never starts it until it names a queue%s. "+
			"Rule 1 of the contracts refuses such a job at once, naming the team's LocalQueue, instead of leaving it suspended.",
			where, KueueQueueLabel, namespaceSelectorClause(cfg.ManagedJobsNamespaceSelector))
		return c
	}
	if mode == AdmissionDeny {
		c.Status = CheckOK
		c.Detail += ": in deny mode it refuses them."
		return c
	}
	c.Status = CheckWarning
	c.Detail += fmt.Sprintf(", and in %s mode it only %s.", mode, map[AdmissionMode]string{AdmissionWarn: "warns", AdmissionAudit: "records them in the audit log"}[mode])
	c.Todo = "Set the cluster's admission mode to deny once the warnings have stopped (the counts below), or set manageJobsWithoutQueueName: true in Kueue's configuration."
	return c
}

func namespaceSelectorClause(sel *metav1.LabelSelector) string {
	if sel == nil {
		return " (in every namespace but kube-system and Kueue's own, Kueue's default managedJobsNamespaceSelector)"
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" (in the namespaces its managedJobsNamespaceSelector %s selects)", s)
}

// The API server counts each failed validation of an admission policy in
// apiserver_validating_admission_policy_check_total, labelled policy,
// policy_binding, error_type and enforcement_action: "deny", "warn" or
// "audit" for a failed validation under that validationAction (k8s.io/
// apiserver@v0.37.2 pkg/admission/plugin/policy/validating/metrics/
// metrics.go, Namespace "apiserver", Subsystem
// "validating_admission_policy", Name "check_total", StabilityLevel BETA;
// dispatcher.go calls ObserveRejection, ObserveWarn, ObserveAudit once per
// failed validation and action, and ObserveAdmission, "allow", only for an
// expression error the failure policy ignores). The API server serves its
// metrics at the non-resource URL /metrics; each API server counts its own
// requests since it started (EKS runs several behind its endpoint).
const (
	metricAdmissionCheck = "apiserver_validating_admission_policy_check_total"
	metricsPath          = "/metrics"
)

// AdmissionCounts are the failed validations of the contracts' policy the
// API server answering counted, by enforcement action.
type AdmissionCounts struct {
	Warn, Deny, Audit int64
	// Errors are those whose expression failed to evaluate (error_type
	// other than no_error), included in the counts above.
	Errors int64
}

// AdmissionCounts reads the API server's own metrics (GET /metrics) and
// sums NameAdmissionPolicy's failed validations.
func (r *ClusterReader) AdmissionCounts(ctx context.Context) (AdmissionCounts, error) {
	rc := r.Discovery.RESTClient()
	if rc == nil {
		return AdmissionCounts{}, fmt.Errorf("provision: no REST client to read %s", metricsPath)
	}
	body, err := rc.Get().AbsPath(metricsPath).DoRaw(ctx)
	if err != nil {
		return AdmissionCounts{}, fmt.Errorf("provision: read the API server's %s: %w", metricsPath, err)
	}
	return parseAdmissionCounts(string(body), NameAdmissionPolicy)
}

// parseAdmissionCounts sums policy's samples of metricAdmissionCheck in a
// Prometheus text exposition.
func parseAdmissionCounts(text, policy string) (AdmissionCounts, error) {
	var n AdmissionCounts
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metricAdmissionCheck+"{")
		if !ok {
			continue
		}
		labels, value, err := parseSample(rest)
		if err != nil {
			return n, fmt.Errorf("provision: %s: %q: %w", metricAdmissionCheck, line, err)
		}
		if labels["policy"] != policy {
			continue
		}
		var into *int64
		switch labels["enforcement_action"] {
		case "warn":
			into = &n.Warn
		case "deny":
			into = &n.Deny
		case "audit":
			into = &n.Audit
		default:
			continue
		}
		*into += value
		if e := labels["error_type"]; e != "" && e != "no_error" {
			n.Errors += value
		}
	}
	return n, sc.Err()
}

// parseSample parses `name="value",...} 12` (the part after the opening
// brace), with the text format's escapes in values (\\, \", \n).
func parseSample(s string) (map[string]string, int64, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, ", ")
		if strings.HasPrefix(s, "}") {
			s = s[1:]
			break
		}
		name, rest, ok := strings.Cut(s, `="`)
		if !ok {
			return nil, 0, fmt.Errorf("bad label at %q", s)
		}
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					val.WriteByte('\n')
					continue
				}
			}
			val.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, 0, fmt.Errorf("unterminated label %s", name)
		}
		labels[name] = val.String()
		s = rest[i+1:]
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil, 0, err
	}
	return labels, int64(v), nil
}

// admissionCountsCheck: the roll-out mode and what the API server counted.
func admissionCountsCheck(ctx context.Context, src ReadinessSources, r *Readiness) Check {
	c := Check{Name: CheckAdmissionCounts}
	mode := src.admissionMode()
	r.AdmissionMode = mode
	if src.Kube == nil || src.Kube.Discovery == nil {
		c.Status, c.Detail = CheckUnknown, errNoCluster.Error()
		return c
	}
	n, err := src.Kube.AdmissionCounts(ctx)
	if err != nil {
		c.Status, c.Detail = CheckUnknown, sentenceOf(err.Error())
		if apierrors.IsForbidden(err) {
			c.Todo = fmt.Sprintf("Grant the portal get on the non-resource URL %s (the Helm chart's ClusterRole does).", metricsPath)
		}
		return c
	}
	r.AdmissionCounts = &n
	c.Status = CheckOK
	c.Detail = fmt.Sprintf("Mode %s. The API server answering counted, since it started, %d warnings, %d denials and %d audit records of policy %s (%s, one per failed rule of a request; each API server of the cluster counts its own)",
		mode, n.Warn, n.Deny, n.Audit, NameAdmissionPolicy, metricAdmissionCheck)
	if n.Errors > 0 {
		c.Status = CheckWarning
		c.Detail += fmt.Sprintf("; %d of them are expressions that failed to evaluate", n.Errors)
		c.Todo = "Re-apply a connection's plan: a team's parameters may predate the policy (or were edited by hand; the drift check says which)."
	}
	c.Detail += "."
	return c
}
