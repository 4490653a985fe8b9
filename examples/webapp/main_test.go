package webapp_test

import (
	"os"
	"testing"

	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim/fake"
	"github.com/converge-lab/converge/sim/simtest"
)

func TestMain(m *testing.M) {
	// Reflectors report a 403 through utilruntime.HandleError, whose global
	// backoff would sleep for decades of virtual time in a bubble.
	fake.DropErrorBackoff()
	// controller-runtime logs a few things, such as a cache that could not
	// sync, through its global logger rather than the manager's.
	logf.SetLogger(klog.Background())
	scenariotest.RegisterFlags() // -converge.seeds and the others
	// Stops the control plane the envtest runs share.
	os.Exit(simtest.Main(m))
}
