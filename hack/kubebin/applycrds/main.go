// Command applycrds creates or updates every CustomResourceDefinition found in
// the YAML files of a directory and waits until each one is Established.
//
//	applycrds [-timeout 60s] KUBECONFIG DIR
//
// It is part of the test bed (hack/testbed/kube.sh), not of the portal.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

func main() {
	timeout := flag.Duration("timeout", 90*time.Second, "overall time limit")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-timeout D] KUBECONFIG DIR\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, flag.Arg(0), flag.Arg(1)); err != nil {
		fmt.Fprintln(os.Stderr, "applycrds:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, dir string) error {
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	if len(crds) == 0 {
		return fmt.Errorf("no CustomResourceDefinition in %s", dir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// Some CRDs are megabytes of OpenAPI schema; do not let client-side
	// throttling dominate.
	cfg.QPS, cfg.Burst = 50, 100
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		if err := createOrUpdate(ctx, api, crd); err != nil {
			return fmt.Errorf("apply %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, api, crd.Name); err != nil {
			return fmt.Errorf("wait for %s: %w", crd.Name, err)
		}
	}
	fmt.Printf("applycrds: %d CustomResourceDefinitions established\n", len(crds))
	return nil
}

type crdAPI interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Create(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.CreateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	Update(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

func createOrUpdate(ctx context.Context, api crdAPI, crd *apiextensionsv1.CustomResourceDefinition) error {
	_, err := api.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{FieldManager: "applycrds"})
	if err == nil {
		fmt.Printf("applycrds: created %s\n", crd.Name)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := crd.DeepCopy()
		next.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, next, metav1.UpdateOptions{FieldManager: "applycrds"})
		return err
	})
	if err == nil {
		fmt.Printf("applycrds: updated %s\n", crd.Name)
	}
	return err
}

func waitEstablished(ctx context.Context, api crdAPI, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			switch {
			case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
				return true, nil
			case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
				return false, fmt.Errorf("names not accepted: %s", c.Message)
			}
		}
		last = "not Established yet"
		return false, nil
	})
	if err != nil && last != "" {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return err
}

// readCRDs decodes every CustomResourceDefinition document of the *.yaml and
// *.yml files in dir (not recursive); other kinds are an error, so that a
// wrong directory is noticed.
func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, n := range names {
		path := filepath.Join(dir, n)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 || isOnlyComments(doc) {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(doc, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if crd.Kind != "CustomResourceDefinition" || crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
				return nil, fmt.Errorf("%s: %s %s is not an apiextensions.k8s.io/v1 CustomResourceDefinition", path, crd.APIVersion, crd.Kind)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

func isOnlyComments(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}
