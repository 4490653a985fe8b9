package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/controller"
)

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

const leaseNamespace = "kube-system"

func election(identity string) *controller.LeaderElectionConfig {
	return &controller.LeaderElectionConfig{
		Namespace: leaseNamespace, Identity: identity,
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
	}
}

func leaseHolder(c *cluster) string {
	obj, err := c.cs.Tracker().Get(leasesGVR, leaseNamespace, controller.DefaultLeaseName)
	if err != nil {
		return ""
	}
	return ptr.Deref(obj.(*coordinationv1.Lease).Spec.HolderIdentity, "")
}

// writeLog attributes Deployment writes to instances and records any write
// made by an instance that did not hold the Lease at that instant.
type writeLog struct {
	c          *cluster
	mu         sync.Mutex
	writes     map[string]int
	violations []string
}

func (w *writeLog) hook(identity string) func(context.Context, string) error {
	return func(_ context.Context, name string) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if holder := leaseHolder(w.c); holder != identity {
			w.violations = append(w.violations, fmt.Sprintf("%s wrote %s at %v while %q held the lease", identity, name, time.Now(), holder))
		}
		w.writes[identity]++
		return nil
	}
}

func (w *writeLog) count(identity string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes[identity]
}

// waitUntil advances virtual time in small steps until cond holds.
func waitUntil(t *testing.T, limit time.Duration, cond func() bool, msg string) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		require.Less(t, time.Since(start), limit, msg)
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
	}
	return time.Since(start)
}

func TestOnlyTheLeaderWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
		log := &writeLog{c: c, writes: map[string]int{}}
		a := launch(t, c, controller.Config{LeaderElection: election("a")}, log.hook("a"))
		b := launch(t, c, controller.Config{LeaderElection: election("b")}, log.hook("b"))
		waitUntil(t, time.Minute, func() bool { return a.ctl.Ready() == nil || b.ctl.Ready() == nil }, "nobody leads")

		leader, standby, standbyID := a, b, "b"
		if b.ctl.Ready() == nil {
			leader, standby, standbyID = b, a, "a"
		}
		leaderID := leaseHolder(c)
		require.Error(t, standby.ctl.Ready(), "a standby is not ready")
		// Ready as it starts leading; its first pass may still be under
		// way at that instant (goroutine order): let it finish.
		synctest.Wait()
		assert.Equal(t, int32(4), c.replicas("web"))
		assert.Equal(t, 1, log.count(leaderID))
		assert.Equal(t, 0, log.count(standbyID))

		// The leader stops: it releases the Lease, so the standby takes over
		// well before the lease duration.
		require.NoError(t, leader.stop())
		assert.Empty(t, leaseHolder(c), "released on cancel")
		took := waitUntil(t, time.Minute, func() bool { return standby.ctl.Ready() == nil }, "standby never led")
		assert.Less(t, took, 15*time.Second, "failover within the lease duration")
		assert.Equal(t, standbyID, leaseHolder(c))

		time.Sleep(controller.DefaultCooldown)
		c.observe("web")
		synctest.Wait()
		assert.Equal(t, int32(8), c.replicas("web"), "the new leader acts")
		assert.Equal(t, 1, log.count(standbyID))
		assert.Empty(t, log.violations)
	})
}

func TestLeaseIsReleasedOnlyAfterInFlightWritesLand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 2)}, pods("web", 2, 0))...)
		entered := make(chan struct{})
		var holderAfterWrite string
		a := launch(t, c, controller.Config{LeaderElection: election("a")}, func(context.Context, string) error {
			close(entered)
			time.Sleep(3 * time.Second) // slow API server
			holderAfterWrite = leaseHolder(c)
			return nil
		})
		<-entered
		require.NoError(t, a.stop())
		assert.Equal(t, "a", holderAfterWrite, "the Lease was still held while the write was in flight")
		assert.Empty(t, leaseHolder(c), "and released after")
		assert.Equal(t, int32(4), c.replicas("web"))
	})
}

func TestLosingTheLeaseStopsAllWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, objects([]runtime.Object{deployment("web", 4)}, pods("web", 4, 4))...)
		log := &writeLog{c: c, writes: map[string]int{}}
		a := startWith(t, c, controller.Config{LeaderElection: election("a")}, log.hook("a"))
		require.Equal(t, "a", leaseHolder(c))

		// Another holder takes the Lease behind a's back and keeps it fresh.
		obj, err := c.cs.Tracker().Get(leasesGVR, leaseNamespace, controller.DefaultLeaseName)
		require.NoError(t, err)
		lease := obj.(*coordinationv1.Lease).DeepCopy()
		lease.Spec.HolderIdentity = ptr.To("intruder")
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		lease.Spec.RenewTime = nil
		lease.ResourceVersion = c.nextRV()
		require.NoError(t, c.cs.Tracker().Update(leasesGVR, lease, leaseNamespace))

		var runErr error
		waitUntil(t, time.Minute, func() bool {
			select {
			case runErr = <-a.done:
				a.done <- runErr // leave it for the cleanup
				return true
			default:
				return false
			}
		}, "Run did not return after losing the lease")
		assert.ErrorIs(t, runErr, controller.ErrLeaderElectionLost)
		assert.Error(t, a.ctl.Ready())

		// Work that appears now is nobody's business of a's.
		for _, p := range []string{"web-0", "web-1", "web-2"} {
			c.setReady(p, false)
		}
		synctest.Wait()
		assert.Equal(t, 0, log.count("a"))
		assert.Equal(t, int32(4), c.replicas("web"))
	})
}
