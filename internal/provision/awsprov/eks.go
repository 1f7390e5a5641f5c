package awsprov

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// EKSAPI is the part of the EKS API the access entry and Pod Identity steps
// call. *eks.Client satisfies it; so does a client pointed at a test endpoint.
// Every method here must appear in Actions (actions_test.go checks).
type EKSAPI interface {
	CreateAccessEntry(context.Context, *eks.CreateAccessEntryInput, ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error)
	DescribeAccessEntry(context.Context, *eks.DescribeAccessEntryInput, ...func(*eks.Options)) (*eks.DescribeAccessEntryOutput, error)
	UpdateAccessEntry(context.Context, *eks.UpdateAccessEntryInput, ...func(*eks.Options)) (*eks.UpdateAccessEntryOutput, error)
	DeleteAccessEntry(context.Context, *eks.DeleteAccessEntryInput, ...func(*eks.Options)) (*eks.DeleteAccessEntryOutput, error)
	AssociateAccessPolicy(context.Context, *eks.AssociateAccessPolicyInput, ...func(*eks.Options)) (*eks.AssociateAccessPolicyOutput, error)
	DisassociateAccessPolicy(context.Context, *eks.DisassociateAccessPolicyInput, ...func(*eks.Options)) (*eks.DisassociateAccessPolicyOutput, error)
	ListAssociatedAccessPolicies(context.Context, *eks.ListAssociatedAccessPoliciesInput, ...func(*eks.Options)) (*eks.ListAssociatedAccessPoliciesOutput, error)
	CreatePodIdentityAssociation(context.Context, *eks.CreatePodIdentityAssociationInput, ...func(*eks.Options)) (*eks.CreatePodIdentityAssociationOutput, error)
	DescribePodIdentityAssociation(context.Context, *eks.DescribePodIdentityAssociationInput, ...func(*eks.Options)) (*eks.DescribePodIdentityAssociationOutput, error)
	UpdatePodIdentityAssociation(context.Context, *eks.UpdatePodIdentityAssociationInput, ...func(*eks.Options)) (*eks.UpdatePodIdentityAssociationOutput, error)
	DeletePodIdentityAssociation(context.Context, *eks.DeletePodIdentityAssociationInput, ...func(*eks.Options)) (*eks.DeletePodIdentityAssociationOutput, error)
	ListPodIdentityAssociations(context.Context, *eks.ListPodIdentityAssociationsInput, ...func(*eks.Options)) (*eks.ListPodIdentityAssociationsOutput, error)
}

var _ EKSAPI = (*eks.Client)(nil)

// AccessPolicy is an EKS access policy associated with an access entry, e.g.
// arn:aws:eks::aws:cluster-access-policy/AmazonSagemakerHyperpodTrainingPolicy.
// With Namespaces it is scoped to them; without, to the whole cluster.
type AccessPolicy struct {
	PolicyARN  string
	Namespaces []string
}

// AccessEntry is the EKS access entry (type STANDARD) a principal should have
// on a cluster, with exactly these Kubernetes groups and access policies.
// ClusterName is the EKS cluster's name, not the HyperPod cluster's.
type AccessEntry struct {
	ClusterName, PrincipalARN string
	KubernetesGroups          []string
	Policies                  []AccessPolicy
	// Tags are set when the entry is created; UpdateAccessEntry cannot
	// change them.
	Tags map[string]string
}

// PodIdentity is the EKS Pod Identity association a service account should
// have: pods running as Namespace/ServiceAccount get RoleARN's credentials.
type PodIdentity struct {
	ClusterName, Namespace, ServiceAccount, RoleARN string
	// Tags are set when the association is created only.
	Tags map[string]string
}

// ClusterNotFoundError is an EKS cluster that does not exist in the client's
// account and region: most often the HyperPod cluster's name given where the
// EKS cluster's name belongs. It is permanent: retrying cannot create it.
//
// EKS answers ResourceNotFoundException both for a missing cluster and for a
// missing access entry, policy or association, and only the second is normal
// (a lookup before a create, or a concurrent delete). So the steps turn it
// into this error only where it can mean nothing but the cluster: on a
// create, and on listing a cluster's Pod Identity associations.
type ClusterNotFoundError struct {
	Cluster string
	Err     error
}

func (e *ClusterNotFoundError) Error() string {
	return fmt.Sprintf("EKS cluster %q not found: check that it is the EKS cluster's name (not the HyperPod cluster's) in the portal's account and region: %v", e.Cluster, e.Err)
}

func (e *ClusterNotFoundError) Unwrap() error { return e.Err }

// Permanent marks the error for IsPermanent: a wrong cluster name stays
// wrong.
func (e *ClusterNotFoundError) Permanent() bool { return true }

const notFoundCode = "ResourceNotFoundException"

// EnsureAccessEntry makes want's principal have exactly want's access entry
// on want's cluster. It is idempotent: it describes the entry, creates it
// (type STANDARD, with want's groups and tags) when missing, updates its
// Kubernetes groups when they differ (order does not matter), associates each
// wanted policy that is missing or scoped differently, and disassociates
// every policy not wanted. Result.ID is the principal ARN and Result.ARN the
// access entry's ARN; Result.Action is Created when the entry did not exist
// when this run looked, else Updated when anything changed, else Unchanged.
//
// A create that races another, or whose response was lost and was retried by
// the SDK (ResourceInUseException), is resolved by describing the entry
// again, so an entry is never created twice.
func EnsureAccessEntry(ctx context.Context, api EKSAPI, want AccessEntry) (Result, error) {
	cluster, principal := want.ClusterName, want.PrincipalARN
	if cluster == "" || principal == "" {
		return Result{}, errors.New("access entry: no cluster name or principal ARN")
	}
	seen := map[string]bool{}
	for _, p := range want.Policies {
		if p.PolicyARN == "" {
			return Result{}, fmt.Errorf("access entry %s: a policy has no ARN", principal)
		}
		if seen[p.PolicyARN] {
			return Result{}, fmt.Errorf("access entry %s: policy %s is wanted twice", principal, p.PolicyARN)
		}
		seen[p.PolicyARN] = true
	}
	fail := func(what string, err error) (Result, error) {
		return Result{}, fmt.Errorf("access entry %s on %s: %s: %w", principal, cluster, what, err)
	}

	created, changed := false, false
	cur, err := describeAccessEntry(ctx, api, cluster, principal)
	if err != nil {
		return fail("describe", err)
	}
	if err := checkOwner(cur, cluster, principal, want.Tags[TagConnection]); err != nil {
		return Result{}, err
	}
	if cur == nil {
		out, cerr := api.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{
			ClusterName:      aws.String(cluster),
			PrincipalArn:     aws.String(principal),
			KubernetesGroups: want.KubernetesGroups,
			Tags:             want.Tags,
			Type:             aws.String("STANDARD"),
		})
		switch {
		case cerr == nil:
			cur = out.AccessEntry
		case hasCode(cerr, "ResourceInUseException"):
			if cur, err = describeAccessEntry(ctx, api, cluster, principal); err != nil {
				return fail("describe after create conflicted", err)
			}
			if cur == nil {
				return fail("create conflicted but there is no entry", cerr)
			}
		case hasCode(cerr, notFoundCode):
			return Result{}, &ClusterNotFoundError{Cluster: cluster, Err: cerr}
		default:
			return fail("create", cerr)
		}
		created = true
	}
	if cur == nil {
		return fail("create", errors.New("no access entry in the response"))
	}

	if !sameSet(want.KubernetesGroups, cur.KubernetesGroups) {
		groups := want.KubernetesGroups
		if groups == nil {
			groups = []string{} // an empty list clears them; a missing one changes nothing
		}
		out, err := api.UpdateAccessEntry(ctx, &eks.UpdateAccessEntryInput{
			ClusterName:      aws.String(cluster),
			PrincipalArn:     aws.String(principal),
			KubernetesGroups: groups,
		})
		if err != nil {
			return fail("update groups", err)
		}
		if out.AccessEntry != nil {
			cur = out.AccessEntry
		}
		changed = true
	}

	have, err := associatedPolicies(ctx, api, cluster, principal)
	if err != nil {
		return fail("list access policies", err)
	}
	// Associate before disassociating, so that a principal whose policies
	// change never passes through having none. Associating a policy the entry
	// has replaces its scope.
	associate, drop := policyChanges(want.Policies, have)
	for _, p := range associate {
		scope := p.scope()
		if _, err := api.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{
			ClusterName:  aws.String(cluster),
			PrincipalArn: aws.String(principal),
			PolicyArn:    aws.String(p.PolicyARN),
			AccessScope:  &scope,
		}); err != nil {
			return fail("associate "+p.PolicyARN, err)
		}
		changed = true
	}
	for _, arn := range drop {
		if err := disassociate(ctx, api, cluster, principal, arn); err != nil {
			return fail("disassociate "+arn, err)
		}
		changed = true
	}

	res := Result{ID: principal, ARN: aws.ToString(cur.AccessEntryArn), Action: Unchanged}
	switch {
	case created:
		res.Action = Created
	case changed:
		res.Action = Updated
	}
	return res, nil
}

// DeleteAccessEntry disassociates every access policy of principalARN's
// access entry on the cluster, then deletes the entry. An entry that does not
// exist (never created, already deleted, or its cluster gone) is not an
// error.
//
// owner, when not empty, is the connection id the entry must be tagged with
// (TagConnection): an entry someone else made is left alone and reported as
// a *NotOursError, so revoking one team never removes access the portal did
// not grant it.
func DeleteAccessEntry(ctx context.Context, api EKSAPI, cluster, principalARN, owner string) error {
	if owner != "" {
		cur, err := describeAccessEntry(ctx, api, cluster, principalARN)
		if err != nil {
			return fmt.Errorf("access entry %s on %s: describe: %w", principalARN, cluster, err)
		}
		if cur == nil {
			return nil
		}
		if err := checkOwner(cur, cluster, principalARN, owner); err != nil {
			return err
		}
	}
	have, err := associatedPolicies(ctx, api, cluster, principalARN)
	if hasCode(err, notFoundCode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("access entry %s on %s: list access policies: %w", principalARN, cluster, err)
	}
	for _, arn := range slices.Sorted(maps.Keys(have)) {
		if err := disassociate(ctx, api, cluster, principalARN, arn); err != nil {
			return fmt.Errorf("access entry %s on %s: disassociate %s: %w", principalARN, cluster, arn, err)
		}
	}
	_, err = api.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principalARN)})
	if err != nil && !hasCode(err, notFoundCode) {
		return fmt.Errorf("access entry %s on %s: delete: %w", principalARN, cluster, err)
	}
	return nil
}

// NotOursError is an AWS resource the step would change or delete that
// this connection did not make (its portal:connection-id tag is another
// connection's, or missing: made by hand). The portal never takes over
// access it did not grant: a contract naming a role that already has an
// access entry (a platform admin's, another team's) stops with this error
// instead of rewriting that entry's groups and policies. It is permanent.
type NotOursError struct {
	What, Name, Cluster string
	Owner               string // the connection id it is tagged with; "" for none
	// Fix says what to do instead; empty is the access entry's advice.
	Fix string
}

func (e *NotOursError) Error() string {
	owner := "no portal connection (made outside the portal)"
	if e.Owner != "" {
		owner = "connection " + e.Owner
	}
	fix := fmt.Sprintf("the portal does not take over access it did not grant; name another role in the contract, or remove that %s first", e.What)
	if e.Fix != "" {
		fix = e.Fix
	}
	return fmt.Sprintf("%s %s on %s belongs to %s, not to this connection: %s", e.What, e.Name, e.Cluster, owner, fix)
}

// Permanent: retrying cannot change whose it is.
func (e *NotOursError) Permanent() bool { return true }

// checkOwner returns a *NotOursError when the existing entry cur is not
// tagged as connection owner's ("" checks nothing; nil cur is nobody's).
func checkOwner(cur *types.AccessEntry, cluster, principal, owner string) error {
	if cur == nil || owner == "" || cur.Tags[TagConnection] == owner {
		return nil
	}
	return &NotOursError{What: "access entry", Name: principal, Cluster: cluster, Owner: cur.Tags[TagConnection]}
}

// policyChanges compares the wanted policies with those the entry has (by
// ARN, with their scopes): which to associate (missing, or scoped
// otherwise) and which ARNs to disassociate (not wanted), sorted.
func policyChanges(want []AccessPolicy, have map[string]types.AccessScope) (associate []AccessPolicy, disassociate []string) {
	wanted := map[string]bool{}
	for _, p := range want {
		wanted[p.PolicyARN] = true
		if s, ok := have[p.PolicyARN]; !ok || scopeKey(s) != scopeKey(p.scope()) {
			associate = append(associate, p)
		}
	}
	for _, arn := range slices.Sorted(maps.Keys(have)) {
		if !wanted[arn] {
			disassociate = append(disassociate, arn)
		}
	}
	return associate, disassociate
}

// EnsurePodIdentity makes want's service account have exactly one Pod
// Identity association, with want's role. It is idempotent: it finds the
// association by namespace and service account, creates it when missing,
// updates its role when it differs, and does nothing otherwise. Result.ID is
// the association id and Result.ARN its ARN. A create that conflicts
// (ResourceInUseException) is resolved by looking the association up again.
func EnsurePodIdentity(ctx context.Context, api EKSAPI, want PodIdentity) (Result, error) {
	cluster, ns, sa := want.ClusterName, want.Namespace, want.ServiceAccount
	if cluster == "" || ns == "" || sa == "" || want.RoleARN == "" {
		return Result{}, errors.New("pod identity: cluster name, namespace, service account and role ARN are all required")
	}
	fail := func(what string, err error) (Result, error) {
		return Result{}, fmt.Errorf("pod identity %s/%s on %s: %s: %w", ns, sa, cluster, what, err)
	}

	created := false
	id, err := findPodIdentity(ctx, api, cluster, ns, sa)
	if hasCode(err, notFoundCode) {
		return Result{}, &ClusterNotFoundError{Cluster: cluster, Err: err}
	}
	if err != nil {
		return fail("list", err)
	}
	if id == "" {
		out, cerr := api.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{
			ClusterName:    aws.String(cluster),
			Namespace:      aws.String(ns),
			ServiceAccount: aws.String(sa),
			RoleArn:        aws.String(want.RoleARN),
			Tags:           want.Tags,
		})
		switch {
		case cerr == nil && out.Association != nil:
			a := out.Association
			return Result{ID: aws.ToString(a.AssociationId), ARN: aws.ToString(a.AssociationArn), Action: Created}, nil
		case cerr == nil:
			return fail("create", errors.New("no association in the response"))
		case hasCode(cerr, "ResourceInUseException"):
			if id, err = findPodIdentity(ctx, api, cluster, ns, sa); err != nil {
				return fail("list after create conflicted", err)
			}
			if id == "" {
				return fail("create conflicted but there is no association", cerr)
			}
		case hasCode(cerr, notFoundCode):
			return Result{}, &ClusterNotFoundError{Cluster: cluster, Err: cerr}
		default:
			return fail("create", cerr)
		}
		created = true
	}

	// List gives no role; Describe does.
	d, err := api.DescribePodIdentityAssociation(ctx, &eks.DescribePodIdentityAssociationInput{
		ClusterName: aws.String(cluster), AssociationId: aws.String(id),
	})
	if err != nil {
		return fail("describe "+id, err)
	}
	if d.Association == nil {
		return fail("describe "+id, errors.New("no association in the response"))
	}
	a := d.Association
	res := Result{ID: id, ARN: aws.ToString(a.AssociationArn), Action: Unchanged}
	if aws.ToString(a.RoleArn) != want.RoleARN {
		if _, err := api.UpdatePodIdentityAssociation(ctx, &eks.UpdatePodIdentityAssociationInput{
			ClusterName: aws.String(cluster), AssociationId: aws.String(id), RoleArn: aws.String(want.RoleARN),
		}); err != nil {
			return fail("update role of "+id, err)
		}
		res.Action = Updated
	}
	if created {
		res.Action = Created
	}
	return res, nil
}

// DeletePodIdentity deletes the service account's Pod Identity association
// on the cluster. An association that does not exist (never created, already
// deleted, or its cluster gone) is not an error.
func DeletePodIdentity(ctx context.Context, api EKSAPI, cluster, namespace, serviceAccount string) error {
	id, err := findPodIdentity(ctx, api, cluster, namespace, serviceAccount)
	if hasCode(err, notFoundCode) {
		return nil
	}
	if err != nil || id == "" {
		return err
	}
	_, err = api.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{
		ClusterName: aws.String(cluster), AssociationId: aws.String(id),
	})
	if err != nil && !hasCode(err, notFoundCode) {
		return fmt.Errorf("pod identity %s/%s on %s: delete %s: %w", namespace, serviceAccount, cluster, id, err)
	}
	return nil
}

// scope is the AccessScope a policy asks for: its namespaces, or the cluster.
func (p AccessPolicy) scope() types.AccessScope {
	if len(p.Namespaces) == 0 {
		return types.AccessScope{Type: types.AccessScopeTypeCluster}
	}
	return types.AccessScope{Type: types.AccessScopeTypeNamespace, Namespaces: slices.Clone(p.Namespaces)}
}

// scopeKey is a canonical string of a scope: namespaces compare as a set.
func scopeKey(s types.AccessScope) string {
	ns := slices.Clone(s.Namespaces)
	slices.Sort(ns)
	return string(s.Type) + "|" + strings.Join(slices.Compact(ns), ",")
}

// sameSet reports whether a and b hold the same strings, regardless of order
// and repetition.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// describeAccessEntry returns the entry, or nil when there is none.
func describeAccessEntry(ctx context.Context, api EKSAPI, cluster, principal string) (*types.AccessEntry, error) {
	out, err := api.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal)})
	if hasCode(err, notFoundCode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return out.AccessEntry, nil
}

// associatedPolicies returns the scope of each policy associated with the
// entry, by policy ARN.
func associatedPolicies(ctx context.Context, api EKSAPI, cluster, principal string) (map[string]types.AccessScope, error) {
	in := &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal), MaxResults: aws.Int32(100)}
	have := map[string]types.AccessScope{}
	for {
		out, err := api.ListAssociatedAccessPolicies(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, p := range out.AssociatedAccessPolicies {
			var s types.AccessScope
			if p.AccessScope != nil {
				s = *p.AccessScope
			}
			have[aws.ToString(p.PolicyArn)] = s
		}
		if aws.ToString(out.NextToken) == "" {
			return have, nil
		}
		in.NextToken = out.NextToken
	}
}

// disassociate removes a policy from the entry; one already gone is fine.
func disassociate(ctx context.Context, api EKSAPI, cluster, principal, policyARN string) error {
	_, err := api.DisassociateAccessPolicy(ctx, &eks.DisassociateAccessPolicyInput{
		ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal), PolicyArn: aws.String(policyARN),
	})
	if err != nil && !hasCode(err, notFoundCode) {
		return err
	}
	return nil
}

// findPodIdentity returns the id of the association for namespace and
// serviceAccount on the cluster, or "" when there is none. The list filters
// are exact, but are matched again here.
func findPodIdentity(ctx context.Context, api EKSAPI, cluster, namespace, serviceAccount string) (string, error) {
	in := &eks.ListPodIdentityAssociationsInput{
		ClusterName:    aws.String(cluster),
		Namespace:      aws.String(namespace),
		ServiceAccount: aws.String(serviceAccount),
		MaxResults:     aws.Int32(100),
	}
	for {
		out, err := api.ListPodIdentityAssociations(ctx, in)
		if err != nil {
			return "", err
		}
		for _, a := range out.Associations {
			if aws.ToString(a.Namespace) == namespace && aws.ToString(a.ServiceAccount) == serviceAccount {
				return aws.ToString(a.AssociationId), nil
			}
		}
		if aws.ToString(out.NextToken) == "" {
			return "", nil
		}
		in.NextToken = out.NextToken
	}
}
