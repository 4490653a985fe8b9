package webapp

import (
	"embed"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/sim"
)

//go:embed config/rbac/*.yaml
var rbacFS embed.FS

// UnderTest is the operator as converge runs it: a controller-runtime
// manager per instance, set up with bug, running as the webapp-operator
// ServiceAccount with config/rbac.
func UnderTest(bug Bug) (scenarios.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return scenarios.Manager{}, err
	}
	rbac, err := embeddedRBAC()
	if err != nil {
		return scenarios.Manager{}, err
	}
	name := "webapp"
	if bug != "" {
		name += "-" + string(bug)
	}
	return scenarios.Manager{
		ControllerName: name,
		Scheme:         scheme,
		RBAC:           sim.Identity{ServiceAccount: "webapp-operator", RBAC: rbac},
		Setup: func(mgr ctrl.Manager, _ scenarios.Instance) error {
			return Setup(mgr, Options{Bug: bug})
		},
	}, nil
}

func embeddedRBAC() ([]runtime.Object, error) {
	var objs []runtime.Object
	files, err := fs.Glob(rbacFS, "config/rbac/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := rbacFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		more, err := sim.DecodeRBAC(f, data)
		if err != nil {
			return nil, fmt.Errorf("webapp: %w", err)
		}
		objs = append(objs, more...)
	}
	return objs, nil
}
