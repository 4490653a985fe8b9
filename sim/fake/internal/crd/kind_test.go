package crd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		edit func(crd *apiextensionsv1.CustomResourceDefinition)
		want string
	}{
		{
			name: "webhook conversion",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
			},
			want: `conversion strategy "Webhook" is not supported`,
		},
		{
			name: "non-structural schema",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) {
				specProps(crd)["extra"] = apiextensionsv1.JSONSchemaProps{}
			},
			want: "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[extra].type: Required value",
		},
		{
			name: "no storage version",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions[0].Storage = false },
			want: "no storage version",
		},
		{
			name: "version without a schema",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.Versions[0].Schema = nil },
			want: "spec.versions[0].schema.openAPIV3Schema: schema is required",
		},
		{
			name: "preserveUnknownFields",
			edit: func(crd *apiextensionsv1.CustomResourceDefinition) { crd.Spec.PreserveUnknownFields = true },
			want: "spec.preserveUnknownFields must be false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := loadCRD(t, "widgets.yaml")
			tt.edit(crd)
			k, err := New(crd)
			require.Error(t, err)
			assert.Nil(t, k)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestKindNames(t *testing.T) {
	widgets := newKind(t, "widgets.yaml")
	assert.Equal(t, "example.com", widgets.Group())
	assert.Equal(t, "widgets", widgets.Resource())
	assert.Equal(t, "widget", widgets.Singular(), "defaulted from the kind")
	assert.Equal(t, "Widget", widgets.Kind())
	assert.Equal(t, "WidgetList", widgets.ListKind(), "defaulted from the kind")
	assert.Equal(t, []string{"wg"}, widgets.ShortNames())
	assert.Equal(t, []string{"all", "toys"}, widgets.Categories())
	assert.True(t, widgets.Namespaced())

	gadgets := newKind(t, "gadgets.yaml")
	assert.False(t, gadgets.Namespaced())
	assert.Empty(t, gadgets.ShortNames())

	// The accessors hand out copies.
	widgets.ShortNames()[0] = "x"
	assert.Equal(t, []string{"wg"}, widgets.ShortNames())
}

func TestKindVersions(t *testing.T) {
	gadgets := newKind(t, "gadgets.yaml")
	assert.Equal(t, []string{"v1beta1", "v1"}, gadgets.Versions(), "served versions in the CRD's order, without v0")
	assert.Equal(t, "v1", gadgets.StorageVersion())

	widgets := newKind(t, "widgets.yaml")
	assert.Equal(t, []string{"v1"}, widgets.Versions())
	assert.Equal(t, "v1", widgets.StorageVersion())
}

func TestKindSubresources(t *testing.T) {
	widgets := newKind(t, "widgets.yaml")
	gadgets := newKind(t, "gadgets.yaml")

	assert.True(t, widgets.HasStatus("v1"))
	assert.True(t, gadgets.HasStatus("v1"))
	assert.False(t, gadgets.HasStatus("v1beta1"), "subresources are per version")
	assert.False(t, gadgets.HasStatus("v0"))
	assert.False(t, widgets.HasStatus("v2"))

	assert.Equal(t, &apiextensionsv1.CustomResourceSubresourceScale{
		SpecReplicasPath:   ".spec.replicas",
		StatusReplicasPath: ".status.replicas",
		LabelSelectorPath:  ptr.To(".status.selector"),
	}, widgets.Scale("v1"))
	assert.Nil(t, gadgets.Scale("v1"))
	assert.Nil(t, widgets.Scale("v2"))
}
