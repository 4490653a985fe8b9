package controller

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// elector runs client-go's leader election on a Lease, with the Lease
// released when the controller stops (ReleaseOnCancel).
type elector struct {
	leading chan struct{} // closed when this instance starts leading
	stopped chan struct{} // closed when the election loop ends, for any reason
	cancel  context.CancelFunc
	done    chan struct{}
}

func (c *Controller) startElector(ctx context.Context, logger klog.Logger) (*elector, error) {
	le := c.cfg.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:    c.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{
			Identity:      le.Identity,
			EventRecorder: c.recorder,
		},
	}
	e := &elector{leading: make(chan struct{}), stopped: make(chan struct{}), done: make(chan struct{})}
	var onceLead, onceStop sync.Once
	le2, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		WatchDog:        c.leaderHealth,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				logger.Info("Started leading", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
				onceLead.Do(func() { close(e.leading) })
			},
			OnStoppedLeading: func() {
				onceStop.Do(func() { close(e.stopped) })
			},
			OnNewLeader: func(identity string) {
				logger.V(2).Info("Leader observed", "lease", le.Namespace+"/"+le.Name, "leader", identity)
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: leader election: %w", err)
	}
	c.leaderHealth.SetLeaderElection(le2)
	ctx, e.cancel = context.WithCancel(ctx)
	go func() {
		defer close(e.done)
		le2.Run(ctx)
	}()
	return e, nil
}

// release stops renewing, gives the Lease up and waits until the election
// loop has ended.
func (e *elector) release() {
	e.cancel()
	<-e.done
}
