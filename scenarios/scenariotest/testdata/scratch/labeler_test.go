package labeler

import (
	"context"
	"os"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/converge-lab/converge/scenarios"
	"github.com/converge-lab/converge/scenarios/scenariotest"
	"github.com/converge-lab/converge/sim"
)

// labeler annotates every ConfigMap labelled team=X with owner=X.
type labeler struct{}

func (labeler) Name() string { return "labeler" }

// Identity: the ServiceAccount and Role in rbac.yaml.
func (labeler) Identity() sim.Identity {
	return sim.Identity{ServiceAccount: "labeler", RBACPaths: []string{"rbac.yaml"}}
}

func (labeler) New(in scenarios.Instance) (scenarios.Runner, error) { return &runner{in: in}, nil }

type runner struct{ in scenarios.Instance }

// Run works while the instance leads, when the scenario runs several. The
// election outlives ctx until the work has stopped: the Lease is given up
// only after the last write, so a successor never writes beside it.
func (r *runner) Run(ctx context.Context) error {
	le := r.in.LeaderElection
	if le == nil {
		return r.work(ctx)
	}
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     r.in.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) { leading <- leadCtx },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return err
	}
	electionCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		elector.Run(electionCtx)
	}()
	defer func() {
		stopElection()
		<-elected
	}()
	select {
	case leadCtx := <-leading:
		workCtx, stopWork := context.WithCancel(ctx)
		defer stopWork()
		defer context.AfterFunc(leadCtx, stopWork)()
		return r.work(workCtx)
	case <-ctx.Done():
		return nil
	}
}

func (r *runner) work(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(r.in.Client, 0, informers.WithNamespace(r.in.Namespace))
	configMaps := factory.Core().V1().ConfigMaps()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := configMaps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), configMaps.Informer().HasSynced) {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			if err := r.sync(ctx, configMaps.Lister().ConfigMaps(r.in.Namespace), key); err != nil {
				queue.AddRateLimited(key)
			} else {
				queue.Forget(key)
			}
			queue.Done(key)
		}
	})
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

func (r *runner) sync(ctx context.Context, lister interface {
	Get(string) (*corev1.ConfigMap, error)
}, key string) error {
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	cm, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	team := cm.Labels["team"]
	if team == "" || cm.Annotations["owner"] == team {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations["owner"] = team
	_, err = r.in.Client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// TestMain gives the tests the -converge.* flags and a process prepared
// for runs.
func TestMain(m *testing.M) { os.Exit(scenariotest.Main(m)) }

func TestScenarios(t *testing.T) {
	// Faults: every fault-free scenario also runs under each of converge's
	// fault profiles, on fake.
	scenariotest.Run(t, "scenarios", labeler{}, scenariotest.Options{Faults: true})
}
