package sim_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/converge-lab/converge/sim"
	"github.com/converge-lab/converge/sim/world"
)

// TestConformanceListsAndWatchList: a paginated list returns every object
// once, in order, each page at the first page's resourceVersion; a
// watch-list sends the current objects, then the bookmark that ends them.
func TestConformanceListsAndWatchList(t *testing.T) {
	onEveryBackend(t, world.Model{Kind: world.NeverReady}, func(t *testing.T, env *sim.Env) {
		ctx := context.Background()
		c, err := kubernetes.NewForConfig(env.RESTConfig)
		require.NoError(t, err)
		cms := c.CoreV1().ConfigMaps(env.Namespace)
		var want []string
		for i := range 5 {
			name := fmt.Sprintf("page-%d", i)
			want = append(want, name)
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"paged": "yes"}}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		var got []string
		opts := metav1.ListOptions{LabelSelector: "paged=yes", Limit: 2}
		first := ""
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5, "a paginated list ends")
			page, err := cms.List(ctx, opts)
			require.NoError(t, err)
			if first == "" {
				first = page.ResourceVersion
			}
			assert.Equal(t, first, page.ResourceVersion)
			for _, cm := range page.Items {
				got = append(got, cm.Name)
			}
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
		assert.Equal(t, want, got)

		w, err := cms.Watch(ctx, metav1.ListOptions{
			LabelSelector: "paged=yes", SendInitialEvents: ptr.To(true),
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
		})
		require.NoError(t, err)
		defer w.Stop()
		var initial []string
		for {
			select {
			case e := <-w.ResultChan():
				cm := e.Object.(*corev1.ConfigMap)
				if e.Type == watch.Bookmark {
					if cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
						continue // a periodic bookmark
					}
					assert.ElementsMatch(t, want, initial, "the current objects, then the bookmark")
					return
				}
				require.Equal(t, watch.Added, e.Type)
				initial = append(initial, cm.Name)
			case <-time.After(30 * time.Second):
				t.Fatal("no initial-events-end bookmark")
			}
		}
	})
}
