package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/provision"
	"github.com/hyperpod-governance/portal/internal/store"
	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

func (s *Server) inventoryView(c echo.Context, values views.InventoryValues, errs map[string]string, saved string) (views.Inventory, error) {
	ctx := c.Request().Context()
	inv := views.Inventory{Values: values, Errors: errs, Saved: saved, CanRefresh: s.opts.ClusterCheck != nil && s.opts.ClusterCanRefresh}
	clusters, err := s.opts.DB.Clusters(ctx)
	if err != nil {
		return inv, err
	}
	if len(clusters) == 1 {
		inv.RefreshCluster = clusters[0]
	}
	for _, cl := range clusters {
		counts, err := s.opts.DB.Inventory(ctx, cl)
		if err != nil {
			return inv, err
		}
		manual, err := s.opts.DB.ManualInventory(ctx, cl)
		if err != nil {
			return inv, err
		}
		observed, err := s.opts.DB.Observed(ctx, cl)
		if err != nil {
			return inv, err
		}
		obs := map[string]store.ObservedRow{}
		for _, o := range observed {
			obs[o.InstanceType] = o
		}
		if len(observed) > 0 {
			o := observed[0]
			// No user: the usage collector wrote it, following the nodes.
			by := cmp.Or(o.ObservedBy, "the usage collector (it follows the nodes)")
			inv.LastRefresh = append(inv.LastRefresh, fmt.Sprintf("%s: last read from the cluster %s by %s.", cl, fmtWhen(o.ObservedAt), by))
		}
		committed, err := s.opts.DB.CommittedCapacity(ctx, cl, 0)
		if err != nil {
			return inv, err
		}
		rep := workflow.CheckCapacity(counts, committed, nil)
		for _, r := range rep.Rows {
			o, seen := obs[r.InstanceType]
			_, overridden := manual[r.InstanceType]
			if r.Capacity == 0 && !seen && !overridden {
				continue
			}
			row := views.InventoryRow{Cluster: cl, InstanceType: r.InstanceType, Count: r.Capacity, Committed: r.Committed, Basis: "manual override"}
			if seen {
				if o.GroupCurrent >= 0 {
					row.Groups = fmt.Sprintf("%d / %d", o.GroupCurrent, o.GroupTarget)
				}
				if o.Nodes >= 0 {
					row.Nodes = fmt.Sprintf("%d of %d", o.NodesSchedulable, o.Nodes)
				}
				if overridden {
					row.Observed = strconv.Itoa(o.Capacity)
				} else {
					row.Basis = o.Basis
				}
			}
			inv.Rows = append(inv.Rows, row)
		}
	}
	return inv, nil
}

// refreshInventory reads the cluster's capacity (nodes by instance type and
// health, SageMaker instance groups) and replaces the observed inventory of
// the named cluster with it, audited. Manual overrides stay.
func (s *Server) refreshInventory(c echo.Context) error {
	p, err := authorize(c, workflow.ActionEditInventory, workflow.Object{})
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	cluster := strings.TrimSpace(c.FormValue("cluster"))
	fail := func(status int, msg string) error {
		inv, err := s.inventoryView(c, views.InventoryValues{}, nil, "")
		if err != nil {
			return err
		}
		inv.RefreshCluster, inv.RefreshError = cluster, msg
		return render(c, status, views.InventoryPage(s.page(c, "Cluster inventory"), inv))
	}
	if !s.opts.ClusterCanRefresh || s.opts.ClusterCheck == nil {
		return fail(http.StatusConflict, "Nothing to read: "+sentence(provision.ErrNothingToRead.Error()))
	}
	if cluster != "" && !workflow.ValidClusterName(cluster) {
		return fail(http.StatusUnprocessableEntity, "Give the HyperPod cluster's name (letters, digits and '-', at most 63 characters).")
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	obs, err := s.opts.ClusterCheck.ReadInventory(rctx, cluster)
	if errors.Is(err, provision.ErrClusterName) {
		return fail(http.StatusUnprocessableEntity, sentence(err.Error()))
	}
	if err != nil {
		s.opts.Logger.WarnContext(ctx, "inventory refresh failed", "request_id", requestID(c), "err", err.Error())
		return fail(http.StatusBadGateway, "The cluster could not be read: "+sentence(err.Error()))
	}
	rows := make([]store.ObservedRow, 0, len(obs.Types))
	for _, t := range obs.Types {
		rows = append(rows, store.ObservedRow{
			InstanceType: t.InstanceType, Capacity: t.Capacity, Basis: t.Basis,
			GroupCurrent: t.GroupCurrent, GroupTarget: t.GroupTarget, Nodes: t.Nodes, NodesSchedulable: t.NodesSchedulable,
		})
	}
	if err := s.opts.DB.ReplaceObserved(ctx, obs.Cluster, rows, actor(p), s.opts.Now()); err != nil {
		return err
	}
	inv, err := s.inventoryView(c, views.InventoryValues{}, nil, fmt.Sprintf("Read %s from the cluster: %d instance types.", obs.Cluster, len(rows)))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.InventoryPage(s.page(c, "Cluster inventory"), inv))
}

func (s *Server) inventoryPage(c echo.Context) error {
	if _, err := authorize(c, workflow.ActionEditInventory, workflow.Object{}); err != nil {
		return err
	}
	inv, err := s.inventoryView(c, views.InventoryValues{}, nil, "")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.InventoryPage(s.page(c, "Cluster inventory"), inv))
}

func (s *Server) setInventory(c echo.Context) error {
	p, err := authorize(c, workflow.ActionEditInventory, workflow.Object{})
	if err != nil {
		return err
	}
	v := views.InventoryValues{
		Cluster:      strings.TrimSpace(c.FormValue("cluster")),
		InstanceType: strings.TrimSpace(c.FormValue("instance_type")),
		Count:        strings.TrimSpace(c.FormValue("count")),
	}
	errs := map[string]string{}
	if !workflow.ValidClusterName(v.Cluster) {
		errs["cluster"] = "Give the HyperPod cluster's name (letters, digits and '-', at most 63 characters)."
	}
	if !slices.Contains(s.opts.Cluster.AllowedInstanceTypes(), v.InstanceType) {
		errs["instance_type"] = "Not a known instance type; use one of the ml.* types HyperPod offers, e.g. ml.p5.48xlarge."
	}
	n, err := strconv.Atoi(v.Count)
	if err != nil || n < 0 || n > 100000 {
		errs["count"] = "Give a whole number of instances between 0 and 100000."
	}
	if len(errs) > 0 {
		inv, err := s.inventoryView(c, v, errs, "")
		if err != nil {
			return err
		}
		return render(c, http.StatusUnprocessableEntity, views.InventoryPage(s.page(c, "Cluster inventory"), inv))
	}
	if err := s.opts.DB.SetInventory(c.Request().Context(), v.Cluster, v.InstanceType, n, actor(p), s.opts.Now()); err != nil {
		return err
	}
	inv, err := s.inventoryView(c, views.InventoryValues{}, nil, "Saved: "+v.Cluster+" has "+v.Count+" × "+v.InstanceType+".")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.InventoryPage(s.page(c, "Cluster inventory"), inv))
}
