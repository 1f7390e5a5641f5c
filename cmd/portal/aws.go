package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov/sdkhttp"
	"github.com/hyperpod-governance/portal/internal/slurm"
	"github.com/hyperpod-governance/portal/internal/slurm/slurmssm"
)

// awsSide is the AWS half of provisioning as configured: the settings that
// go into every plan, and the runner that makes the calls (nil when plans
// have no AWS steps or the worker runs dry).
type awsSide struct {
	Settings awsprov.Settings
	Runner   *awsprov.Runner
	// Slurm is the Slurm cluster's transport: the local commands
	// (--slurm-conf) or Session Manager to the HyperPod controller
	// (--slurm-controller-group); nil for none.
	Slurm slurm.Runner
}

// loadAWS reads --aws-settings and builds the clients. Without a settings
// file plans have no AWS steps, except in --dev without a cluster, where the
// built-in example settings show (and dry-run) them. The team groups that
// get Studio come from the groups file: the owners' and members' groups of
// each team.
func loadAWS(ctx context.Context, cfg Config, mapping auth.Mapping, dryRun bool, logger *slog.Logger) (awsSide, error) {
	var s awsprov.Settings
	switch {
	case cfg.AWSSettingsFile != "":
		b, err := os.ReadFile(cfg.AWSSettingsFile)
		if err != nil {
			return awsSide{}, fmt.Errorf("--aws-settings: %w", err)
		}
		if s, err = awsprov.ParseSettings(b); err != nil {
			return awsSide{}, fmt.Errorf("--aws-settings %s: %w", cfg.AWSSettingsFile, err)
		}
	case cfg.Dev && dryRun:
		s = awsprov.DevSettings()
		logger.Info("AWS steps planned with the built-in example settings (dry run: nothing is called)")
	case cfg.SlurmControllerGroup != "":
		return awsSide{}, errors.New("--slurm-controller-group: needs --aws-settings (with cluster_arn, the HyperPod Slurm cluster)")
	default:
		logger.Info("no --aws-settings: plans have no AWS steps (compute quota, Studio, EKS access entries and Pod Identity are left to you)")
		return awsSide{}, nil
	}
	if s.IdentityStoreID == "" {
		s.IdentityStoreID = cfg.IdentityStoreID
	}
	if err := s.WithDefaults().Check(); err != nil {
		return awsSide{}, fmt.Errorf("--aws-settings %s: every problem at once:\n%w", cfg.AWSSettingsFile, err)
	}
	s.TeamGroups = map[string][]string{}
	for team, g := range mapping.Teams {
		s.TeamGroups[team] = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(g.Owners), g.Members...))))
	}
	side := awsSide{Settings: s}
	// Without --kubeconfig the Kubernetes and AWS steps run dry, but a
	// Slurm transport over Session Manager is still made: a portal for a
	// HyperPod Slurm cluster has no Kubernetes cluster, and its Slurm
	// connections are provisioned through it (provision.Worker.dryRun).
	if dryRun && cfg.SlurmControllerGroup == "" {
		return side, nil
	}
	region := cfg.AWSRegion
	if region == "" {
		region = s.Region
	}
	ac, err := loadAWSConfig(ctx, region)
	if err != nil {
		return awsSide{}, fmt.Errorf("--aws-settings: %w", err)
	}
	if s.Region != "" && ac.Region != s.Region {
		return awsSide{}, fmt.Errorf("aws: --aws-region %s is not the settings' region %s", ac.Region, s.Region)
	}
	ep := cfg.AWSEndpoints
	if !dryRun {
		side.Runner = &awsprov.Runner{
			Clients: awsprov.NewClients(ac, awsprov.Endpoints{
				SageMaker: ep["sagemaker"], EKS: ep["eks"], SSOAdmin: ep["ssoadmin"], IdentityStore: ep["identitystore"], DataZone: ep["datazone"], IAM: ep["iam"], EC2: ep["ec2"],
			}),
			Poll: awsprov.PollConfig{Interval: cfg.AWSPollInterval, Timeout: cfg.AWSPollTimeout},
		}
	}
	if cfg.SlurmControllerGroup != "" {
		if s.ClusterARN == "" {
			return awsSide{}, errors.New("--slurm-controller-group: the --aws-settings need cluster_arn, the HyperPod Slurm cluster whose controller the portal reaches")
		}
		side.Slurm = &slurmssm.Controller{
			Sessions: ssm.NewFromConfig(ac, func(o *ssm.Options) {
				if ep["ssm"] != "" {
					o.BaseEndpoint = aws.String(ep["ssm"])
				}
			}),
			Nodes: sagemaker.NewFromConfig(ac, func(o *sagemaker.Options) {
				if ep["sagemaker"] != "" {
					o.BaseEndpoint = aws.String(ep["sagemaker"])
				}
			}),
			ClusterARN: s.ClusterARN, Group: cfg.SlurmControllerGroup, SlurmBin: cfg.SlurmBin,
		}
		logger.Info("Slurm over Session Manager", "cluster", s.ClusterARN, "controller_group", cfg.SlurmControllerGroup)
	}
	if side.Runner != nil {
		logger.Info("AWS provisioning on", "region", ac.Region, "endpoint_overrides", len(ep))
	}
	return side, nil
}

// loadAWSConfig loads the SDK's default configuration (credentials from the
// default chain: in a cluster, the Pod Identity of the portal's own
// ServiceAccount) in region, or the chain's region when region is empty.
func loadAWSConfig(ctx context.Context, region string) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if ac.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set --aws-region (or the settings' region, or AWS_REGION)")
	}
	ac.AppID = "hyperpod-portal"
	ac.HTTPClient = sdkhttp.Client() // see sdkhttp: smithy-go closes request bodies early

	return ac, nil
}

// scheduler is the client the scheduler config jobs call, or nil (an
// untyped nil: the jobs then record dry runs) without real AWS calls.
func (a awsSide) scheduler() awsprov.SchedulerAPI {
	if a.Runner == nil {
		return nil
	}
	return a.Runner.Clients.Scheduler
}

// quotas adopts a compute quota at an admin's choice through SageMaker, or
// is an untyped nil without real AWS calls.
func (a awsSide) quotas() provision.QuotaAdopter {
	if a.Runner == nil {
		return nil
	}
	return provision.AWSQuotaAdopter{API: a.Runner.Clients.SageMaker}
}

// drifter compares plans' AWS resources with AWS for the drift check, or
// is an untyped nil without real AWS calls.
func (a awsSide) drifter() provision.AWSDrifter {
	if a.Runner == nil {
		return nil
	}
	return a.Runner
}

// lifecycleCheck simulates the contract roles' IAM policies for the
// cluster lifecycle actions at approval, or is nil without real AWS calls
// or a cluster_arn in the settings.
func (a awsSide) lifecycleCheck() provision.ClusterLifecycleChecker {
	if a.Runner == nil || a.Runner.Clients.IAM == nil || a.Settings.ClusterARN == "" {
		return nil
	}
	return provision.AWSLifecycleCheck{IAM: a.Runner.Clients.IAM, ClusterARN: a.Settings.ClusterARN}
}

// preview looks up what a plan's AWS calls would do, or is nil without
// real AWS calls.
func (a awsSide) preview() provision.AWSPreviewer {
	if a.Runner == nil {
		return nil
	}
	return provision.AWSPreviews{Lookup: a.Runner}
}

// teamRolePrefix is the AWS settings' team_role_prefix (none without
// --aws-settings): where contract roles must live, as on the form.
func teamRolePrefix(cfg Config) (string, error) {
	if cfg.AWSSettingsFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(cfg.AWSSettingsFile)
	if err != nil {
		return "", fmt.Errorf("--aws-settings: %w", err)
	}
	s, err := awsprov.ParseSettings(b)
	if err != nil {
		return "", fmt.Errorf("--aws-settings %s: %w", cfg.AWSSettingsFile, err)
	}
	return s.TeamRolePrefix, nil
}
