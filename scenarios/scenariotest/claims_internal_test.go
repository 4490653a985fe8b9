package scenariotest

import (
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Processes that share points through a claims folder take each point
// once between them, whoever asks first.
func TestClaimsTakeEachPointOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "claims")
	const points, takers = 50, 4
	taken := make([][]int, takers)
	var wg sync.WaitGroup
	for i := range takers {
		take := claimer(t, dir)
		wg.Go(func() {
			for k := range points {
				if take(strconv.Itoa(k)) {
					taken[i] = append(taken[i], k)
				}
			}
		})
	}
	wg.Wait()
	seen := map[int]int{}
	for _, ks := range taken {
		for _, k := range ks {
			seen[k]++
		}
	}
	assert.Len(t, seen, points)
	for k, n := range seen {
		assert.Equal(t, 1, n, "point %d taken %d times", k, n)
	}
}
