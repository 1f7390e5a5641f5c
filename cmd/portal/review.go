package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/identitystore"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/hyperpod-governance/portal/internal/auth"
	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/provision/awsprov"
	"github.com/hyperpod-governance/portal/internal/review"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/usage"
)

// newReviewScheduler builds the review loop (internal/review): the teams'
// owners groups from the groups file; the group sync through the identity
// store when --identity-store-id is set and userNames are e-mail addresses
// (the contracts name owners by e-mail); the orchestrator's version from
// the cluster's API server with --kubeconfig; the rate card for the
// evidence's cost.
func newReviewScheduler(ctx context.Context, db *store.DB, cfg Config, mapping auth.Mapping, rates *usage.RateCard,
	cluster provision.ClusterSettings, kube *rest.Config, logger *slog.Logger) (*review.Scheduler, error) {
	s := &review.Scheduler{DB: db, OwnersGroups: map[string][]string{}, Rates: rates, Accelerators: usage.AcceleratorsOf(cluster.AcceleratorTable()),
		Logger: logger, Lease: 3 * cfg.ReviewInterval,
		// The scheduler runs only on the elected leader (internal/leader),
		// so every leader claims its row under one name: a new leader
		// after a handover must not wait out the dead one's claim.
		Owner: "the elected leader"}
	for team, g := range mapping.Teams {
		s.OwnersGroups[team] = g.Owners
	}
	if cfg.IdentityStoreID != "" {
		if auth.UserAttribute(cfg.IdentityStoreUserAttribute) != auth.UserAttrEmail {
			logger.Warn("review scheduler: no owners group sync: owners are named by e-mail address, and --identity-store-user-attribute is not email; membership is as recorded at each owner's last sign-in")
		} else {
			awsCfg, err := loadAWSConfig(ctx, cfg.AWSRegion)
			if err != nil {
				return nil, fmt.Errorf("--identity-store-id: %w", err)
			}
			api := identitystore.NewFromConfig(awsCfg, func(o *identitystore.Options) {
				if ep := cfg.AWSEndpoints["identitystore"]; ep != "" {
					o.BaseEndpoint = aws.String(ep)
				}
			})
			s.Directory = awsprov.GroupDirectory{API: api, StoreID: cfg.IdentityStoreID}
		}
	}
	if kube != nil {
		dc, err := discovery.NewDiscoveryClientForConfig(kube)
		if err != nil {
			return nil, fmt.Errorf("review scheduler: %w", err)
		}
		// The orchestrator's version is the EKS cluster's Kubernetes
		// version, as its API server reports it (GET /version: client-go's
		// discovery ServerVersion, version.Info.GitVersion). The portal
		// serves one shared cluster (--kubeconfig), on which every
		// connection runs.
		s.Orchestrator = func(context.Context, string) (string, error) {
			v, err := dc.ServerVersion()
			if err != nil {
				return "", err
			}
			return v.GitVersion, nil
		}
	}
	return s, nil
}
