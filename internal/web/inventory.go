package web

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/hyperpod-governance/portal/internal/views"
	"github.com/hyperpod-governance/portal/internal/workflow"
)

var clusterNameRE = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)

func (s *Server) inventoryView(c echo.Context, values views.InventoryValues, errs map[string]string, saved string) (views.Inventory, error) {
	ctx := c.Request().Context()
	inv := views.Inventory{Values: values, Errors: errs, Saved: saved}
	clusters, err := s.opts.DB.Clusters(ctx)
	if err != nil {
		return inv, err
	}
	for _, cl := range clusters {
		counts, err := s.opts.DB.Inventory(ctx, cl)
		if err != nil {
			return inv, err
		}
		committed, err := s.opts.DB.CommittedCapacity(ctx, cl, 0)
		if err != nil {
			return inv, err
		}
		rep := workflow.CheckCapacity(counts, committed, nil)
		for _, r := range rep.Rows {
			if r.Capacity > 0 {
				inv.Rows = append(inv.Rows, views.InventoryRow{Cluster: cl, InstanceType: r.InstanceType, Count: r.Capacity, Committed: r.Committed})
			}
		}
	}
	return inv, nil
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
	if !clusterNameRE.MatchString(v.Cluster) {
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
