// Command kueuehooks points Kueue's admission webhooks at a Kueue controller
// manager listening on loopback, for the test bed (hack/testbed/cluster.sh).
//
//	kueuehooks [-timeout 90s] KUBECONFIG MANIFESTS URL CA_FILE
//
// MANIFESTS is config/components/webhook/manifests.yaml of the Kueue module
// (the same go.sum-verified version as the controller and the CRDs). In a real
// install kustomize points each webhook at the Service kueue-webhook-service in
// kueue-system and cert-manager or Kueue's internal certificate rotator fills
// in caBundle. The test bed has neither Services with endpoints nor a
// network: every clientConfig becomes a URL, URL+path, with CA_FILE (the
// self-signed serving certificate, SAN IP:127.0.0.1) as caBundle. The
// configurations are renamed kueue-<name> (as Kueue's own manifests are
// named after kustomize's namePrefix).
//
// Then it waits until the webhooks answer: a server-side dry-run create of a
// ResourceFlavor goes through the mutating and validating webhooks, so it
// succeeds only when the API server reaches Kueue over TLS.
//
// It is part of the test bed, not of the portal.
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
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func main() {
	timeout := flag.Duration("timeout", 90*time.Second, "overall time limit")
	flag.Parse()
	if flag.NArg() != 4 {
		fmt.Fprintf(os.Stderr, "usage: %s [-timeout D] KUBECONFIG MANIFESTS URL CA_FILE\n", os.Args[0])
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, flag.Arg(0), flag.Arg(1), flag.Arg(2), flag.Arg(3)); err != nil {
		fmt.Fprintln(os.Stderr, "kueuehooks:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, manifests, baseURL, caFile string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	mutating, validating, err := readManifests(manifests)
	if err != nil {
		return err
	}
	if mutating == nil || validating == nil {
		return fmt.Errorf("%s: want one MutatingWebhookConfiguration and one ValidatingWebhookConfiguration", manifests)
	}
	base := strings.TrimRight(baseURL, "/")
	for i := range mutating.Webhooks {
		if err := pointAt(&mutating.Webhooks[i].ClientConfig, base, ca); err != nil {
			return fmt.Errorf("%s: %w", mutating.Webhooks[i].Name, err)
		}
	}
	for i := range validating.Webhooks {
		if err := pointAt(&validating.Webhooks[i].ClientConfig, base, ca); err != nil {
			return fmt.Errorf("%s: %w", validating.Webhooks[i].Name, err)
		}
	}
	mutating.ObjectMeta = metav1.ObjectMeta{Name: "kueue-" + mutating.Name}
	validating.ObjectMeta = metav1.ObjectMeta{Name: "kueue-" + validating.Name}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Kueue's own namespace (configuration `namespace`), as a real install has.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace kueue-system: %w", err)
	}
	mapi := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if old, err := mapi.Get(ctx, mutating.Name, metav1.GetOptions{}); err == nil {
		mutating.ResourceVersion = old.ResourceVersion
		_, err = mapi.Update(ctx, mutating, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
	} else if _, err := mapi.Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", mutating.Name, err)
	}
	vapi := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if old, err := vapi.Get(ctx, validating.Name, metav1.GetOptions{}); err == nil {
		validating.ResourceVersion = old.ResourceVersion
		_, err = vapi.Update(ctx, validating, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
	} else if _, err := vapi.Create(ctx, validating, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create %s: %w", validating.Name, err)
	}
	fmt.Printf("kueuehooks: %d mutating and %d validating webhooks point at %s\n",
		len(mutating.Webhooks), len(validating.Webhooks), base)

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return waitAnswering(ctx, dyn)
}

// pointAt replaces a Service reference by URL base+path with caBundle ca.
func pointAt(cc *admissionv1.WebhookClientConfig, base string, ca []byte) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return errors.New("clientConfig has no service path")
	}
	url := base + *cc.Service.Path
	cc.Service = nil
	cc.URL = &url
	cc.CABundle = ca
	return nil
}

func readManifests(path string) (*admissionv1.MutatingWebhookConfiguration, *admissionv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var (
		m *admissionv1.MutatingWebhookConfiguration
		v *admissionv1.ValidatingWebhookConfiguration
	)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, nil, err
		}
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			m = &admissionv1.MutatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, m); err != nil {
				return nil, nil, err
			}
		case "ValidatingWebhookConfiguration":
			v = &admissionv1.ValidatingWebhookConfiguration{}
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				return nil, nil, err
			}
		}
	}
	return m, v, nil
}

// waitAnswering retries a dry-run create of a ResourceFlavor until the
// API server's calls to Kueue's webhooks succeed.
func waitAnswering(ctx context.Context, dyn dynamic.Interface) error {
	gvr := schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	rf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2",
		"kind":       "ResourceFlavor",
		"metadata":   map[string]any{"name": "testbed-webhook-probe"},
	}}
	var last error
	for {
		_, err := dyn.Resource(gvr).Create(ctx, rf, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			fmt.Println("kueuehooks: the API server reaches Kueue's webhooks")
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("Kueue's webhooks do not answer: %w", last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
