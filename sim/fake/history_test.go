package fake_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-lab/converge/sim/fake"
)

// The history keeps exactly the last HistoryLimit writes, however many
// have been trimmed: a watch from the oldest kept resourceVersion's
// predecessor replays them all in order, one from before gets 410.
func TestHistoryKeepsTheLastWrites(t *testing.T) {
	const limit = 5
	b, err := fake.New(fake.Config{HistoryLimit: limit})
	require.NoError(t, err)
	env, err := b.Start(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Stop()) })
	ctx := context.Background()
	cms := env.Observer.CoreV1().ConfigMaps(ns)
	var rvs []int64
	for i := range 4*limit + 3 { // past several batches of trimming
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		rv, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
		require.NoError(t, err)
		rvs = append(rvs, rv)
	}
	n := len(rvs)
	// From the write before the oldest kept one: the last limit writes.
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rvs[n-limit-1], 10)})
	require.NoError(t, err)
	var got []string
	for range limit {
		got = append(got, (<-w.ResultChan()).Object.(*corev1.ConfigMap).Name)
	}
	w.Stop()
	var want []string
	for i := n - limit; i < n; i++ {
		want = append(want, fmt.Sprintf("c%d", i))
	}
	assert.Equal(t, want, got)
	// From one write earlier: that write is gone.
	_, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rvs[n-limit-2], 10)})
	assert.True(t, apierrors.IsResourceExpired(err), "got %v", err)
}

// BenchmarkWriteWithFullHistory is one update once the history is full,
// for two history limits side by side: trimming costs the same whatever
// the limit.
func BenchmarkWriteWithFullHistory(b *testing.B) {
	for _, limit := range []int{2_000, 20_000} {
		b.Run(fmt.Sprintf("limit-%d", limit), func(b *testing.B) {
			be, err := fake.New(fake.Config{HistoryLimit: limit})
			require.NoError(b, err)
			env, err := be.Start(context.Background())
			require.NoError(b, err)
			defer func() { _ = be.Stop() }()
			ctx := context.Background()
			cms := env.Observer.CoreV1().ConfigMaps(ns)
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
			require.NoError(b, err)
			for i := range limit + 1 {
				cm.Data["n"] = strconv.Itoa(i)
				cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				require.NoError(b, err)
			}
			b.ResetTimer()
			for i := range b.N {
				cm.Data["n"] = strconv.Itoa(i)
				if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
