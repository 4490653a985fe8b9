package mirror

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// runElected waits for the Lease, then works until ctx ends or the Lease
// is lost. The Lease is given up only after the workers have stopped, so a
// successor never writes alongside a write of this instance.
func (c *Controller) runElected(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	le := c.cfg.LeaderElection
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
			Client:     c.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
		},
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			// Cancelled when renewing fails.
			OnStartedLeading: func(leadCtx context.Context) { leading <- leadCtx },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("mirror: leader election: %w", err)
	}

	// The election outlives ctx, until the deferred release below.
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

	logger.Info("Waiting for the Lease", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
	var leadCtx context.Context
	select {
	case leadCtx = <-leading:
	case <-ctx.Done():
		return nil
	}
	logger.Info("Leading", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	defer context.AfterFunc(leadCtx, stopWork)()
	c.leading.Store(true)
	c.work(workCtx)
	c.leading.Store(false)
	if ctx.Err() == nil {
		logger.Error(nil, "Lost the Lease, stopped working", "lease", le.Namespace+"/"+le.Name)
		return ErrLeaderElectionLost
	}
	return nil
}
