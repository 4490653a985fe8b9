package scenarios

import (
	"sync"

	"k8s.io/klog/v2"

	"github.com/converge-lab/converge/internal/crversion"
)

var sayPriorityQueue sync.Once

func logPriorityQueueOff() {
	sayPriorityQueue.Do(func() {
		klog.Background().Info("controller-runtime " + crversion.Version() + "'s priority queue can deadlock when a controller stops in process (fixed in " + crversion.PriorityQueueFixed + "); the managers' controllers run with UsePriorityQueue false (set it in Manager.Options to choose)")
	})
}
