package mirror_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-lab/converge/examples/mirror"
	versionedfake "github.com/converge-lab/converge/examples/mirror/generated/clientset/versioned/fake"
)

// unused is a client New accepts; nothing here reaches its server.
var unused = &rest.Config{Host: "http://unused.invalid"}

func TestNewValidatesConfig(t *testing.T) {
	//lint:ignore SA1019 code-generator v0.35, which builds against every minor converge supports, writes no NewClientset
	kube, mirrors := kubernetes.NewForConfigOrDie(unused), versionedfake.NewSimpleClientset()
	for _, tc := range []struct {
		name string
		cfg  mirror.Config
		want string // in the error; empty means valid
	}{
		{"defaults", mirror.Config{Namespace: ns}, ""},
		{"no namespace", mirror.Config{}, "namespace is required"},
		{"bad namespace", mirror.Config{Namespace: "Demo"}, `namespace "Demo"`},
		{"negative workers", mirror.Config{Namespace: ns, Workers: -1}, "workers"},
		{"unknown bug", mirror.Config{Namespace: ns, Bug: "typo"}, `unknown bug "typo"`},
		{"election", mirror.Config{Namespace: ns, LeaderElection: &mirror.LeaderElection{Identity: "a"}}, ""},
		{"election without identity", mirror.Config{Namespace: ns, LeaderElection: &mirror.LeaderElection{}}, "identity is required"},
		{"renew deadline too long", mirror.Config{Namespace: ns, LeaderElection: &mirror.LeaderElection{
			Identity: "a", LeaseDuration: 10 * time.Second, RenewDeadline: 10 * time.Second,
		}}, "lease duration 10s must be greater than renew deadline 10s"},
		{"retry period too long", mirror.Config{Namespace: ns, LeaderElection: &mirror.LeaderElection{
			Identity: "a", RetryPeriod: 9 * time.Second,
		}}, "1.2 x retry period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mirror.New(tc.cfg, kube, mirrors)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := mirror.New(mirror.Config{Namespace: ns}, nil, mirrors)
	assert.Error(t, err, "a nil client")
}

func TestBugsAreDescribedAndAccepted(t *testing.T) {
	seen := map[mirror.Bug]bool{}
	for _, b := range mirror.Bugs() {
		assert.NotEmpty(t, b.Description, b.Name)
		assert.False(t, seen[b.Name], "%s listed twice", b.Name)
		seen[b.Name] = true
		//lint:ignore SA1019 code-generator v0.35, which builds against every minor converge supports, writes no NewClientset
		_, err := mirror.New(mirror.Config{Namespace: ns, Bug: b.Name}, kubernetes.NewForConfigOrDie(unused), versionedfake.NewSimpleClientset())
		assert.NoError(t, err, b.Name)
	}
	for _, b := range []mirror.Bug{mirror.BugNoSourceWatch, mirror.BugOrphanTargets, mirror.BugStaleStatus, mirror.BugRetryNoBackoff, mirror.BugTombstonePanic} {
		assert.True(t, seen[b], "%s is listed", b)
	}
}
