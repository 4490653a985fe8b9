package crd

import (
	"encoding/json"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// memo holds what New built and what Validate found, by the CRD's JSON
// (and the stored one's, for an update): every run of a scenario installs the same CRDs on a new fake
// server, and checking and building a kind compiles its CEL rules, a sixth
// of a short run's CPU. A Kind is safe for concurrent use, and neither
// depends on anything but the CRD. At most maxMemo of each are kept; past
// them the memo starts again.
var memo struct {
	sync.Mutex
	kinds   map[string]*Kind
	creates map[string]field.ErrorList
}

const maxMemo = 256

// memoKey is crd's JSON; false when it has none.
func memoKey(crd *apiextensionsv1.CustomResourceDefinition) (string, bool) {
	b, err := json.Marshal(crd)
	return string(b), err == nil
}

func memoKind(key string) (*Kind, bool) {
	memo.Lock()
	defer memo.Unlock()
	k, ok := memo.kinds[key]
	return k, ok
}

func keepKind(key string, k *Kind) {
	memo.Lock()
	defer memo.Unlock()
	if memo.kinds == nil || len(memo.kinds) >= maxMemo {
		memo.kinds = map[string]*Kind{}
	}
	memo.kinds[key] = k
}

func memoCreate(key string) (field.ErrorList, bool) {
	memo.Lock()
	defer memo.Unlock()
	errs, ok := memo.creates[key]
	return cloneErrors(errs), ok
}

func keepCreate(key string, errs field.ErrorList) {
	memo.Lock()
	defer memo.Unlock()
	if memo.creates == nil || len(memo.creates) >= maxMemo {
		memo.creates = map[string]field.ErrorList{}
	}
	memo.creates[key] = cloneErrors(errs)
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
