package sim_test

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/world"
)

// widgetCRD is a CRD with what the fake must serve as a real server does:
// defaults, an enum, bounds, a CEL rule, pruning, and the status and scale
// subresources. Its group is per backend, so the backends sharing one
// control plane do not meet.
func widgetCRD(group string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList", ShortNames: []string{"wd"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.ready"},
				},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {
							Type:     "object",
							Required: []string{"image"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"image":    {Type: "string", MinLength: ptr.To[int64](1)},
								"replicas": {Type: "integer", Minimum: ptr.To(0.0), Maximum: ptr.To(10.0), Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
								"mode":     {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Fast"`)}, {Raw: []byte(`"Slow"`)}}, Default: &apiextensionsv1.JSON{Raw: []byte(`"Slow"`)}},
							},
							XValidations: apiextensionsv1.ValidationRules{{Rule: "self.replicas <= 5 || self.mode == 'Fast'", Message: "more than 5 replicas need mode Fast"}},
						},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"ready": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
}

func widget(group, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}
}

// causes lists an Invalid error's causes as "field: message".
func causes(t *testing.T, err error) []string {
	t.Helper()
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	var out []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	sort.Strings(out)
	return out
}

// TestConformanceCustomResources: a CRD's life on every backend, through a
// rest.Config: established and discovered, its resources validated,
// defaulted and pruned, its status and scale subresources, and its
// deletion taking its resources along.
func TestConformanceCustomResources(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		cfg := env.RESTConfig
		group := env.Backend + ".conformance.converge.test"
		crds := apiextensions.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
		_, err := crds.Create(ctx, widgetCRD(group), metav1.CreateOptions{})
		require.NoError(t, err)
		deleted := false
		defer func() {
			if !deleted {
				_ = crds.Delete(ctx, "widgets."+group, metav1.DeleteOptions{})
			}
		}()
		eventually(t, func() bool {
			c, err := crds.Get(ctx, "widgets."+group, metav1.GetOptions{})
			require.NoError(t, err)
			for _, cond := range c.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}, "the CRD is established")

		dc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
		var served []string
		eventually(t, func() bool {
			list, err := dc.ServerResourcesForGroupVersion(group + "/v1")
			if err != nil {
				return false
			}
			served = nil
			for _, r := range list.APIResources {
				served = append(served, r.Name)
			}
			return len(served) == 3
		}, "discovery lists the new resource")
		sort.Strings(served)
		assert.Equal(t, []string{"widgets", "widgets/scale", "widgets/status"}, served)

		gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
		widgets := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace(env.Namespace)
		var w *unstructured.Unstructured
		eventually(t, func() bool {
			w, err = widgets.Create(ctx, widget(group, "a", map[string]any{"image": "app:1", "extra": "pruned"}), metav1.CreateOptions{})
			return err == nil
		}, "the resource is served")
		spec := w.Object["spec"].(map[string]any)
		assert.Equal(t, map[string]any{"image": "app:1", "replicas": int64(1), "mode": "Slow"}, spec, "defaulted and pruned")
		assert.Equal(t, int64(1), w.GetGeneration())

		_, err = widgets.Create(ctx, widget(group, "b", map[string]any{"replicas": int64(11), "mode": "Medium"}), metav1.CreateOptions{})
		assert.Equal(t, []string{
			"<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
			"spec.image: Required value",
			"spec.mode: Unsupported value: \"Medium\": supported values: \"Fast\", \"Slow\"",
			"spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
		}, causes(t, err))
		_, err = widgets.Create(ctx, widget(group, "c", map[string]any{"image": "app:1", "replicas": int64(7)}), metav1.CreateOptions{})
		assert.Equal(t, []string{"spec: Invalid value: more than 5 replicas need mode Fast"}, causes(t, err))
		_, err = widgets.Get(ctx, "c", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "an invalid resource is not stored: %v", err)

		// Status: only through the subresource.
		w.Object["status"] = map[string]any{"ready": int64(1)}
		w, err = widgets.Update(ctx, w, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.NotContains(t, w.Object, "status", "a main-resource write drops status")
		w.Object["status"] = map[string]any{"ready": int64(1)}
		w, err = widgets.UpdateStatus(ctx, w, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"ready": int64(1)}, w.Object["status"])
		assert.Equal(t, int64(1), w.GetGeneration(), "a status write keeps the generation")

		// Scale: reads and writes the paths the CRD names.
		scale, err := widgets.Get(ctx, "a", metav1.GetOptions{}, "scale")
		require.NoError(t, err)
		replicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
		ready, _, _ := unstructured.NestedInt64(scale.Object, "status", "replicas")
		assert.Equal(t, []int64{1, 1}, []int64{replicas, ready})
		require.NoError(t, unstructured.SetNestedField(scale.Object, int64(3), "spec", "replicas"))
		_, err = widgets.Update(ctx, scale, metav1.UpdateOptions{}, "scale")
		require.NoError(t, err)
		w, err = widgets.Get(ctx, "a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int64(3), w.Object["spec"].(map[string]any)["replicas"])
		assert.Equal(t, int64(2), w.GetGeneration(), "a scale write is a spec change")

		// Deleting the CRD deletes its resources, then itself.
		require.NoError(t, crds.Delete(ctx, "widgets."+group, metav1.DeleteOptions{}))
		deleted = true
		eventually(t, func() bool {
			_, err := crds.Get(ctx, "widgets."+group, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "the CRD goes")
		eventually(t, func() bool {
			_, err := widgets.List(ctx, metav1.ListOptions{})
			return apierrors.IsNotFound(err)
		}, "its resource is no longer served")
	})
}
