package mirror_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-lab/converge/examples/mirror"
	"github.com/converge-lab/converge/examples/mirror/api/v1alpha1"
	"github.com/converge-lab/converge/examples/mirror/generated/clientset/versioned"
	versionedfake "github.com/converge-lab/converge/examples/mirror/generated/clientset/versioned/fake"
	mirrorinformers "github.com/converge-lab/converge/examples/mirror/generated/informers/externalversions"
	mirrorlisters "github.com/converge-lab/converge/examples/mirror/generated/listers/api/v1alpha1"
)

// The controller is built on the generated clientset, informers and
// listers; these stop compiling when the generated code and the types part.
var (
	_ func(mirror.Config, kubernetes.Interface, versioned.Interface) (*mirror.Controller, error) = mirror.New
	_ versioned.Interface                                                                        = (*versioned.Clientset)(nil)
	_ versioned.Interface                                                                        = (*versionedfake.Clientset)(nil)
	_ func(versioned.Interface, time.Duration) mirrorinformers.SharedInformerFactory             = mirrorinformers.NewSharedInformerFactory
	_ func(cache.Indexer) mirrorlisters.MirrorLister                                             = mirrorlisters.NewMirrorLister
	_ runtime.Object                                                                             = (*v1alpha1.Mirror)(nil)
	_ runtime.Object                                                                             = (*v1alpha1.MirrorList)(nil)
)

// TestGeneratedCodeIsUpToDate regenerates the code into a temporary folder
// and diffs it with the tree. It builds the generators (about 20 s), so it
// runs only when asked.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	if os.Getenv("CONVERGE_VERIFY_CODEGEN") != "1" {
		t.Skip("SKIPPED: set CONVERGE_VERIFY_CODEGEN=1 to check the generated code against hack/codegen/update.sh --verify")
	}
	out, err := exec.Command("bash", "../../hack/codegen/update.sh", "--verify").CombinedOutput()
	require.NoError(t, err, "%s", out)
}
