package crd

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks crd as the server does on create (old == nil) or update.
// Like the server it validates a defaulted copy whose status is the one the
// server would store: cleared on create, kept from old on update, with the
// storage version added to storedVersions. It includes the metadata checks the
// server runs for CRDs, such as the name being spec.names.plural+"."+spec.group.
// A create or update checked before in the process is not checked again.
func Validate(ctx context.Context, crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	key, ok := memoKey(crd)
	if old != nil {
		prev, known := memoKey(old)
		key, ok = key+"\x00"+prev, ok && known
	}
	if ok {
		if errs, ok := checks.Get(key); ok {
			return cloneErrors(errs)
		}
	}
	errs := validate(ctx, crd, old)
	if ok {
		checks.Put(key, cloneErrors(errs))
	}
	return errs
}

func validate(ctx context.Context, crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	next := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(next)
	if old == nil {
		next.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	} else {
		next.Status = *old.Status.DeepCopy()
	}
	addStorageVersion(next)
	in, err := toInternal(next)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if old == nil {
		return validation.ValidateCustomResourceDefinition(ctx, in)
	}

	prev := old.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(prev)
	oldIn, err := toInternal(prev)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validation.ValidateCustomResourceDefinitionUpdate(ctx, in, oldIn)
}

// Default applies the server's defaulting to crd in place. Like the server,
// which handles a CRD in its internal form and stores it back as v1, it
// round-trips crd through that form, so raw JSON in the schema (defaults,
// enums, examples) comes out compacted with sorted keys, as a stored CRD
// reads back.
func Default(crd *apiextensionsv1.CustomResourceDefinition) {
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	in, err := toInternal(crd)
	if err != nil {
		// Validate reports the same error; leave crd as defaulted.
		return
	}
	var out apiextensionsv1.CustomResourceDefinition
	if err := apiextensionsv1.Convert_apiextensions_CustomResourceDefinition_To_v1_CustomResourceDefinition(in, &out, nil); err != nil {
		return
	}
	out.TypeMeta = crd.TypeMeta
	*crd = out
}

// Condition reasons and messages the naming and establishing controllers write.
const (
	namesAcceptedReason  = "NoConflicts"
	namesAcceptedMessage = "no conflicts found"
	establishedReason    = "InitialNamesAccepted"
	establishedMessage   = "the initial names have been accepted"
)

// Established returns a copy of crd with the status the server's controllers
// set once they serve it: the requested names accepted, NamesAccepted and
// Established true, and the storage version in storedVersions. A condition
// whose status does not change keeps its lastTransitionTime, as on the server.
func Established(crd *apiextensionsv1.CustomResourceDefinition, now metav1.Time) *apiextensionsv1.CustomResourceDefinition {
	out := crd.DeepCopy()
	out.Status.AcceptedNames = *out.Spec.Names.DeepCopy()
	setCondition(out, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.NamesAccepted,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  namesAcceptedReason,
		Message: namesAcceptedMessage,
	}, now)
	setCondition(out, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Established,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  establishedReason,
		Message: establishedMessage,
	}, now)
	addStorageVersion(out)
	return out
}

// setCondition is the server's SetCRDCondition with the clock passed in.
func setCondition(crd *apiextensionsv1.CustomResourceDefinition, c apiextensionsv1.CustomResourceDefinitionCondition, now metav1.Time) {
	i := slices.IndexFunc(crd.Status.Conditions, func(x apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return x.Type == c.Type
	})
	if i < 0 {
		c.LastTransitionTime = now
		crd.Status.Conditions = append(crd.Status.Conditions, c)
		return
	}
	old := &crd.Status.Conditions[i]
	if old.Status != c.Status || old.LastTransitionTime.IsZero() {
		old.LastTransitionTime = now
	}
	old.Status, old.Reason, old.Message = c.Status, c.Reason, c.Message
}

// addStorageVersion records the storage version in status.storedVersions, as
// the server does on every create and update.
func addStorageVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !slices.Contains(crd.Status.StoredVersions, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}

func toInternal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	var out apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &out, nil); err != nil {
		return nil, fmt.Errorf("converting CustomResourceDefinition %q to the internal version: %w", crd.Name, err)
	}
	return &out, nil
}
