package controller

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Reconcile results, the values of the "result" label.
const (
	resultSuccess   = "success"
	resultRequeue   = "requeue"
	resultError     = "error"
	resultPermanent = "permanent_error"
	resultExhausted = "exhausted"
)

// metrics are the scaler's Prometheus collectors. They live on a registry the
// caller chooses, never on the global one, so two controllers in one process
// (leader election tests, the harness) do not collide.
type metrics struct {
	reconciles      *prometheus.CounterVec
	reconcileTime   prometheus.Histogram
	scaleActions    prometheus.Counter
	exhaustedKeys   prometheus.Counter
	leader          prometheus.Gauge
	queueDepth      *prometheus.GaugeVec
	queueAdds       *prometheus.CounterVec
	queueLatency    *prometheus.HistogramVec
	queueWork       *prometheus.HistogramVec
	queueUnfinished *prometheus.GaugeVec
	queueLongest    *prometheus.GaugeVec
	queueRetries    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10ns .. ~3h, as the workqueue's own
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "converge_scaler_reconciles_total",
			Help: "Reconciles by result: success, requeue, error (retried), permanent_error (not retried), exhausted (retries exhausted, tried again after a cooldown).",
		}, []string{"result"}),
		reconcileTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "converge_scaler_reconcile_duration_seconds",
			Help:    "Time one reconcile took.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		scaleActions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "converge_scaler_scale_actions_total",
			Help: "Scale-ups written to the API server.",
		}),
		exhaustedKeys: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "converge_scaler_retries_exhausted_total",
			Help: "Times a key ran out of quick retries; it is then tried once per cooldown until it succeeds.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "converge_scaler_leader",
			Help: "1 while this instance leads and its workers run, else 0.",
		}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current depth of the workqueue.",
		}, []string{"name"}),
		queueAdds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Adds handled by the workqueue.",
		}, []string{"name"}),
		queueLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "Seconds an item waits in the workqueue before it is processed.",
			Buckets: buckets,
		}, []string{"name"}),
		queueWork: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "Seconds processing an item from the workqueue takes.",
			Buckets: buckets,
		}, []string{"name"}),
		queueUnfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration; large values suggest stuck workers.",
		}, []string{"name"}),
		queueLongest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds",
			Help: "Seconds the longest running processor of the workqueue has been running.",
		}, []string{"name"}),
		queueRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Retries handled by the workqueue.",
		}, []string{"name"}),
	}
	var errs []error
	for _, c := range []prometheus.Collector{
		m.reconciles, m.reconcileTime, m.scaleActions, m.exhaustedKeys, m.leader,
		m.queueDepth, m.queueAdds, m.queueLatency, m.queueWork, m.queueUnfinished, m.queueLongest, m.queueRetries,
	} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Pre-create the result series so dashboards see zeros, not gaps.
	for _, r := range []string{resultSuccess, resultRequeue, resultError, resultPermanent, resultExhausted} {
		m.reconciles.WithLabelValues(r)
	}
	return m, nil
}

// workqueueMetrics adapts the metrics to workqueue.MetricsProvider.
type workqueueMetrics struct{ m *metrics }

var _ workqueue.MetricsProvider = workqueueMetrics{}

func (p workqueueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.m.queueDepth.WithLabelValues(name)
}

func (p workqueueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.m.queueAdds.WithLabelValues(name)
}

func (p workqueueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.m.queueLatency.WithLabelValues(name)
}

func (p workqueueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.m.queueWork.WithLabelValues(name)
}

func (p workqueueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.queueUnfinished.WithLabelValues(name)
}

func (p workqueueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.queueLongest.WithLabelValues(name)
}

func (p workqueueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.m.queueRetries.WithLabelValues(name)
}
