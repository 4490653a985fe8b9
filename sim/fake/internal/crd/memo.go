package crd

import (
	"encoding/json"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/converge-lab/converge/internal/bounded"
)

// kinds and checks hold what New built and what Validate found, by the
// CRD's JSON (and the stored one's, for an update): every run of a
// scenario installs the same CRDs on a new fake server, and checking and
// building a kind compiles its CEL rules, a sixth of a short run's CPU. A
// Kind is safe for concurrent use, and neither depends on anything but the
// CRD.
var (
	kinds  = bounded.Map[string, *Kind]{Limit: maxMemo}
	checks = bounded.Map[string, field.ErrorList]{Limit: maxMemo}
)

const maxMemo = 256

// memoKey is crd's JSON; false when it has none.
func memoKey(crd *apiextensionsv1.CustomResourceDefinition) (string, bool) {
	b, err := json.Marshal(crd)
	return string(b), err == nil
}

// cloneErrors copies errs and the errors in it: a caller may change what
// it is given.
func cloneErrors(errs field.ErrorList) field.ErrorList {
	if errs == nil {
		return nil
	}
	out := make(field.ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		out[i] = &c
	}
	return out
}
