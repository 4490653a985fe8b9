package controller

import "k8s.io/client-go/tools/cache"

// Enqueue adds a key as an event handler would; benchmarks use it to drive
// reconciles without changing the cluster.
func (c *Controller) Enqueue(namespace, name string) {
	c.queue.Add(cache.NewObjectName(namespace, name))
}
