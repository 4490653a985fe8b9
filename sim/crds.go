package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// MaxCRDFileSize bounds a CRD file, as the API server bounds a request.
const MaxCRDFileSize = 3 << 20

// ReadCRDs reads the CustomResourceDefinitions in paths: YAML or JSON files
// (several documents each), folders of them (*.yaml, *.yml, *.json, not
// recursive), as envtest's CRDDirectoryPaths, or kustomizations (a
// kubebuilder project's config/crd). Documents of other kinds are
// skipped; a document that is not valid YAML, or a CRD that does not decode
// strictly, is an error naming its file and document.
func ReadCRDs(paths ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := readPaths(paths)
	if err != nil {
		return nil, fmt.Errorf("CRDs: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	seen := map[string]bool{}
	for _, d := range docs {
		f := d.Source
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(d.Raw, &tm); err != nil {
			return nil, fmt.Errorf("CRDs: %s, document %d: %w", f, d.N, err)
		}
		if tm.Kind != "CustomResourceDefinition" {
			continue
		}
		if tm.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("CRDs: %s, document %d: apiVersion %q: only %s is served", f, d.N, tm.APIVersion, apiextensionsv1.SchemeGroupVersion)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(d.Raw, &crd); err != nil {
			return nil, fmt.Errorf("CRDs: %s, document %d: %w", f, d.N, err)
		}
		if seen[crd.Name] {
			return nil, fmt.Errorf("CRDs: %s is defined twice (%s, document %d)", crd.Name, f, d.N)
		}
		seen[crd.Name] = true
		crds = append(crds, &crd)
	}
	return crds, nil
}

// InstallCRDs creates the CRDs through cfg, or updates them where they
// exist (on a shared control plane, another run may have installed them),
// and waits until each is established and served, for up to timeout (zero
// means a minute). It works on every backend, fake included.
func InstallCRDs(ctx context.Context, cfg *rest.Config, timeout time.Duration, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if len(crds) == 0 {
		return nil
	}
	if timeout == 0 {
		timeout = time.Minute
	}
	client, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("CRDs: %w", err)
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		_, err := api.Create(ctx, crd.DeepCopy(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = updateCRD(ctx, client, crd)
		}
		if err != nil {
			return fmt.Errorf("CRDs: installing %s: %w", crd.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, crd := range crds {
		for {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err == nil && established(got) && served(client, got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRDs: %s not established within %v (last error: %v)", crd.Name, timeout, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func updateCRD(ctx context.Context, client apiextensions.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for range 5 {
		current, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := current.DeepCopy()
		next.Spec = crd.Spec
		next.Labels, next.Annotations = crd.Labels, crd.Annotations
		if _, err = api.Update(ctx, next, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("kept conflicting with other writers")
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// served: discovery lists the CRD's resource in every served version, so
// RESTMappers built now find it.
func served(client apiextensions.Interface, crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		list, err := client.Discovery().ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
		if err != nil {
			return false
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
			return false
		}
	}
	return true
}
