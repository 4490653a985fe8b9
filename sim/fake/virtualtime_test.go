package fake_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/converge-lab/converge/controller"
)

// backoffRun runs the scaler on the fake backend, inside a synctest bubble,
// against an API that answers every scale with 500 until the key runs out
// of its 20 retries: 5ms doubling to 1000s, about 55 minutes of backoff. It
// returns the virtual time the run took.
func backoffRun(t *testing.T) (virtual time.Duration, patches int) {
	b, env := start(t)
	ctx := context.Background()
	d := deployment("web", 2)
	d.Labels[controller.LabelEnabled] = controller.ValueEnabled
	d, err := env.Observer.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	d.Status.ObservedGeneration = d.Generation // as the Deployment controller would
	_, err = env.Observer.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)

	client, err := b.NewClient()
	require.NoError(t, err)
	client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches++
		return true, nil, apierrors.NewInternalError(errors.New("injected"))
	})
	ctl, err := controller.New(controller.Config{MaxRetries: 20}, client)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- ctl.Run(runCtx) }()
	reg := ctl.Registry()
	defer func() {
		cancel()
		<-done
	}()
	for {
		time.Sleep(time.Second)
		synctest.Wait()
		families, err := reg.Gather()
		require.NoError(t, err)
		if exhausted(families) {
			break
		}
		require.Less(t, time.Since(start), 24*time.Hour, "retries never exhausted")
	}
	return time.Since(start), patches
}

func TestVirtualTimeRunsBackoffFasterThanWallTime(t *testing.T) {
	wallStart := time.Now()
	var virtual time.Duration
	var patches int
	synctest.Test(t, func(t *testing.T) { virtual, patches = backoffRun(t) })
	wall := time.Since(wallStart)
	// The ratio is reported, not asserted: wall time depends on the machine.
	// The virtual duration is exact, which is what proves the clock is virtual.

	assert.Equal(t, 21, patches, "the first try and 20 retries")
	// 5ms x (2^0 + ... + 2^17) + 2 x 1000s (capped), plus the 1s polling step.
	assert.InDelta(t, (5*time.Millisecond*(1<<18-1) + 2000*time.Second).Seconds(), virtual.Seconds(), 2)
	t.Logf("virtual %v in wall %v: %.0fx", virtual, wall, virtual.Seconds()/wall.Seconds())
}

func exhausted(families []*dto.MetricFamily) bool {
	for _, f := range families {
		if f.GetName() == "converge_scaler_retries_exhausted_total" {
			for _, m := range f.GetMetric() {
				if m.GetCounter().GetValue() > 0 {
					return true
				}
			}
		}
	}
	return false
}
