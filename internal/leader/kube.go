package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Kube elects through a Kubernetes Lease (coordination.k8s.io/v1) named
// Name in Namespace, with client-go's leaderelection and its LeaseLock,
// which gets, creates and updates the Lease: the RBAC it needs is a Role
// in Namespace with apiGroups [coordination.k8s.io], resources [leases],
// verbs [get, create, update] (see resourcelock/leaselock.go: Get, Create,
// Update of Leases(namespace)).
type Kube struct {
	Config    *rest.Config
	Namespace string
	Name      string // default LeaseName
	Durations Durations
	Logger    *slog.Logger
	status    *Status
}

// NewKube is an election on the Lease name in namespace of the cluster
// cfg reaches, for the process identity.
func NewKube(cfg *rest.Config, namespace, name, identity string, d Durations, logger *slog.Logger) (*Kube, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	if namespace == "" {
		return nil, fmt.Errorf("leader: a Kubernetes Lease needs a namespace")
	}
	if name == "" {
		name = LeaseName
	}
	return &Kube{Config: cfg, Namespace: namespace, Name: name, Durations: d, Logger: logOr(logger),
		status: NewStatus(identity, "kubernetes lease")}, nil
}

// Status is the election's status.
func (k *Kube) Status() *Status { return k.status }

// InClusterNamespace is the namespace of the pod this process runs in,
// from its service account's mount; "" outside a pod.
func InClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Run campaigns until ctx is done (Elector's).
func (k *Kube) Run(ctx context.Context, lead func(ctx context.Context)) {
	cfg := rest.CopyConfig(k.Config)
	// One hung request must not cost the leadership: client-go's
	// resourcelock.NewFromKubeconfig bounds each to RenewDeadline/2.
	cfg.Timeout = k.Durations.RenewDeadline / 2
	client, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		k.Logger.Error("leader election: Kubernetes client", "err", err)
		return
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name},
		Client:     client,
		LockConfig: resourcelock.ResourceLockConfig{Identity: k.status.identity},
	}
	for ctx.Err() == nil {
		k.term(ctx, lock, lead)
		sleep(ctx, k.Durations.RetryPeriod)
	}
}

// term runs one election until this process loses the lease or ctx is
// done. On ctx done the lease is released (ReleaseOnCancel), but only once
// lead has returned: client-go asks that everything the lease guards has
// completed before the context it runs on is cancelled.
func (k *Kube) term(ctx context.Context, lock resourcelock.Interface, lead func(context.Context)) {
	var t term
	elCtx, elCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer elCancel()
	stopWatch := context.AfterFunc(ctx, func() { t.stopAndWait(); elCancel() })
	defer stopWatch()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		Name:          k.Name,
		LeaseDuration: k.Durations.LeaseDuration,
		RenewDeadline: k.Durations.RenewDeadline,
		RetryPeriod:   k.Durations.RetryPeriod,
		// Released on a clean shutdown, so the next leader need not wait
		// out the lease.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				if !t.start() {
					return
				}
				defer t.wg.Done()
				leadCtx, cancel := context.WithCancel(lctx)
				defer cancel()
				stop := context.AfterFunc(ctx, cancel)
				defer stop()
				k.status.setLeading(true)
				// Not leading from the moment the term ends (lost lease or
				// shutdown), before the singletons have wound down.
				context.AfterFunc(leadCtx, func() { k.status.setLeading(false) })
				k.Logger.Info("leader election: this process leads; starting the singletons", "identity", k.status.identity, "lease", k.Namespace+"/"+k.Name)
				lead(leadCtx)
				k.status.setLeading(false)
				k.Logger.Info("leader election: stopped leading; singletons stopped", "identity", k.status.identity)
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				k.status.observed(identity)
				if identity != k.status.identity {
					k.Logger.Info("leader election: the leader is another process", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		k.Logger.Error("leader election", "err", err)
		return
	}
	le.Run(elCtx)
	t.stopAndWait()
}
