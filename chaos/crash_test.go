package chaos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/converge-lab/converge/chaos"
	"github.com/converge-lab/converge/controller"
	"github.com/converge-lab/converge/sim/simtest"
)

// instance is one scaler with its own injector and wire recorder.
type instance struct {
	name   string
	inj    *chaos.Injector
	wire   *wire
	cancel context.CancelFunc
	done   chan error
	crash  time.Time
	mu     sync.Mutex
}

func (i *instance) crashedAt() time.Time {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.crash
}

// TestCrashedLeaderIsReplacedAndNeverWritesAgain runs two scalers with
// leader election. Whichever leads crashes right after its first write: its
// client is fenced and it is stopped without a drain (it cannot release the
// Lease). The other takes over once the Lease expires and scales again;
// nothing of the crashed one reaches the server after the crash, so there
// is never more than one writer.
func TestCrashedLeaderIsReplacedAndNeverWritesAgain(t *testing.T) {
	t.Parallel() // a namespace of its own
	_, env := simtest.RequireRun(t, "crash-")
	ctx := context.Background()
	var err error

	_, logCtx := ktesting.NewTestContext(t)
	var instances []*instance
	var ctls []*controller.Controller
	for _, name := range []string{"a", "b"} {
		i := &instance{name: name, wire: &wire{}, done: make(chan error, 1)}
		runCtx, cancel := context.WithCancel(logCtx)
		i.cancel = cancel
		var injections []chaos.Injection
		if name == "a" { // a leads first (it starts first) and crashes
			injections = []chaos.Injection{{Fault: chaos.Crash(chaos.Target{Resource: "deployments", Namespace: env.Namespace, Verbs: []string{"patch"}}), When: chaos.When{Nth: 1}}}
		}
		i.inj, err = chaos.NewInjector(chaos.Plan{
			Injections: injections,
			OnCrash: func() {
				i.mu.Lock()
				i.crash = time.Now()
				i.mu.Unlock()
				cancel() // killed: no drain can reach the server anyway
			},
		})
		require.NoError(t, err)
		cfg := rest.CopyConfig(env.ControllerConfig)
		cfg.Wrap(i.wire.wrap)
		client, err := kubernetes.NewForConfig(chaos.Configure(cfg, i.inj))
		require.NoError(t, err)
		ctl, err := controller.New(controller.Config{
			Namespace: env.Namespace, // other runs' Deployments may linger on the shared control plane
			Cooldown:  time.Second,
			LeaderElection: &controller.LeaderElectionConfig{
				Namespace: "converge-system", Name: env.Namespace, Identity: name,
				LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			},
		}, client)
		require.NoError(t, err)
		go func() { i.done <- ctl.Run(runCtx) }()
		instances = append(instances, i)
		ctls = append(ctls, ctl)
		if name == "a" {
			require.Eventually(t, func() bool { return ctl.Ready() == nil }, time.Minute, 20*time.Millisecond, "a leads")
		}
	}
	require.Error(t, ctls[1].Ready(), "b stands by")
	t.Cleanup(func() {
		for _, i := range instances {
			i.cancel()
			<-i.done
		}
	})

	_, err = env.Observer.AppsV1().Deployments(env.Namespace).Create(ctx, managed("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	// 2 -> 4 by the first leader, which then crashes; 4 -> 8 by the other.
	require.Eventually(t, func() bool { return replicas(t, env, "web") == 8 }, 2*time.Minute, 100*time.Millisecond)

	crashed, survivor := instances[0], instances[1]
	require.True(t, crashed.inj.Crashed(), "the leader crashed")
	require.False(t, survivor.inj.Crashed())
	crashAt := crashed.crashedAt()
	require.False(t, crashAt.IsZero())

	for _, s := range crashed.wire.all() {
		assert.False(t, s.at.After(crashAt), "%s reached the server after the crash: %v", crashed.name, s.r)
	}
	// The crash comes right after the first write that took effect (one
	// before it may have met a real 409 from a status update).
	tookEffect := 0
	for _, s := range crashed.wire.all() {
		if s.r.Verb == "patch" && s.r.Resource == "deployments" && s.status >= 200 && s.status < 300 {
			tookEffect++
		}
	}
	assert.Equal(t, 1, tookEffect)
	writes := survivor.wire.times("patch", "deployments")
	require.NotEmpty(t, writes)
	for _, w := range writes {
		assert.True(t, w.After(crashAt), "the survivor wrote only after the crash: never two writers")
	}
	assert.Less(t, writes[0].Sub(crashAt), 10*time.Second, "took over within about a lease duration")
}
