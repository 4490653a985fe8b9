package mirror_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/examples/mirror"
)

func elected(identity string) mirror.Config {
	return mirror.Config{LeaderElection: &mirror.LeaderElection{Identity: identity}}
}

func TestOnlyTheLeaderWritesAndTheStandbyTakesOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		instances := map[string]*instance{"a": e.run(elected("a")), "b": e.run(elected("b"))}
		e.createConfigMap("settings", blue)
		e.createMirror("m", "settings", "copy")
		e.waitFor("synced", e.holds(blue, "copy"))

		leaderID := e.leaseHolder()
		require.Contains(t, instances, leaderID)
		standbyID := map[string]string{"a": "b", "b": "a"}[leaderID]
		leader, standby := instances[leaderID], instances[standbyID]
		assert.Positive(t, leader.writes.Load())
		assert.Zero(t, standby.writes.Load(), "a standby does not write")

		// Stopping gives the Lease up, so the standby need not wait for it
		// to expire.
		require.NoError(t, leader.stop())
		begin := time.Now()
		e.waitFor("the standby leads", func() bool { return e.leaseHolder() == standbyID })
		assert.Less(t, time.Since(begin), mirror.DefaultLeaseDuration, "failover before the Lease would expire")

		e.setData("settings", green)
		e.waitFor("the new leader syncs", e.holds(green, "copy"))
		assert.Positive(t, standby.writes.Load())
	})
}

func TestLosingTheLeaseStopsTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := start(t)
		a := e.run(elected("a"))
		e.createConfigMap("settings", blue)
		e.createMirror("m", "settings", "copy")
		e.waitFor("synced", e.holds(blue, "copy"))
		require.Equal(t, "a", e.leaseHolder())

		// Someone else takes the Lease behind a's back: a cannot renew.
		lease, err := e.kube.CoordinationV1().Leases(ns).Get(context.Background(), mirror.DefaultLeaseName, metav1.GetOptions{})
		require.NoError(t, err)
		lease.Spec.HolderIdentity = ptr.To("intruder")
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		_, err = e.kube.CoordinationV1().Leases(ns).Update(context.Background(), lease, metav1.UpdateOptions{})
		require.NoError(t, err)

		a.wantErr = mirror.ErrLeaderElectionLost
		e.waitFor("Run returns", a.returned)
		assert.ErrorIs(t, a.err, mirror.ErrLeaderElectionLost)
		writes := a.writes.Load()
		e.setData("settings", green)
		time.Sleep(time.Minute)
		assert.Equal(t, writes, a.writes.Load(), "no write after losing the Lease")
		assert.True(t, e.holds(blue, "copy")())
	})
}
