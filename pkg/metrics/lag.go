package metrics

import (
	"context"
	"reflect"
	"regexp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The queue metrics say how much work waits and how old it is: what autoscaling and
// the alerts of deploy/prometheus/alerts.yml read. They are read when Prometheus
// scrapes (a QueueReader asks NATS and Redis then), so an idle process costs nothing
// and a scrape always sees the present.

// ConsumerLag is one durable consumer's backlog, as the server reports it.
type ConsumerLag struct {
	// Stream and Consumer are the un-namespaced names (JOBS, chatworker).
	Stream, Consumer string
	// Pending is num_pending: messages not yet delivered to any worker.
	Pending uint64
	// AckPending is num_ack_pending: messages delivered and not yet acknowledged.
	AckPending uint64
}

// Queues is what a scrape reads about the fleet's queues. A field whose reading
// failed is left zero and Up is false.
type Queues struct {
	// Consumers are the backlogs of the consumers this process reads.
	Consumers []ConsumerLag
	// DLQMessages is how many dead letters the DLQ stream holds.
	DLQMessages uint64
	// OldestQueued is when the oldest job message still queued (not yet taken off
	// its work queue) was published, by queue ("chat", "batch"); absent: none.
	OldestQueued map[string]time.Time
	// Unfinished is how many jobs have not ended (the reaper's deadline set).
	Unfinished int64
	// NextDeadline is the earliest deadline of an unfinished job (zero: none).
	NextDeadline time.Time
	// Up reports whether every reading succeeded.
	Up bool
}

// QueueReader reads Queues for a scrape; ctx bounds it.
type QueueReader interface {
	ReadQueues(ctx context.Context) Queues
}

// queueCollector turns a QueueReader's answer into metrics at each scrape.
type queueCollector struct {
	r       QueueReader
	timeout time.Duration

	pending, ackPending, dlq, oldest, unfinished, margin, up *prometheus.Desc
}

func newQueueCollector(r QueueReader, timeout time.Duration) *queueCollector {
	return &queueCollector{
		r: r, timeout: timeout,
		pending: prometheus.NewDesc("fleet_consumer_pending_messages",
			"Messages of a durable consumer not yet delivered to any worker (num_pending).", []string{"stream", "consumer"}, nil),
		ackPending: prometheus.NewDesc("fleet_consumer_ack_pending_messages",
			"Messages of a durable consumer delivered and not yet acknowledged (num_ack_pending).", []string{"stream", "consumer"}, nil),
		dlq: prometheus.NewDesc("fleet_dlq_messages", "Dead letters held in the DLQ stream.", nil, nil),
		oldest: prometheus.NewDesc("fleet_oldest_queued_job_age_seconds",
			"Age of the oldest job message still on its work queue, by queue (chat, batch); 0 when none waits.", []string{"queue"}, nil),
		unfinished: prometheus.NewDesc("fleet_unfinished_jobs", "Jobs that have not ended yet.", nil, nil),
		margin: prometheus.NewDesc("fleet_next_job_deadline_seconds",
			"Seconds until the earliest deadline of an unfinished job (negative: overdue, the reaper ends it); absent when none.", nil, nil),
		up: prometheus.NewDesc("fleet_queue_metrics_up", "1 if the last scrape read every queue metric, 0 if NATS or Redis did not answer.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.ackPending, c.dlq, c.oldest, c.unfinished, c.margin, c.up} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	q := c.r.ReadQueues(ctx)
	now := time.Now()
	for _, l := range q.Consumers {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(l.Pending), l.Stream, l.Consumer)
		ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(l.AckPending), l.Stream, l.Consumer)
	}
	ch <- prometheus.MustNewConstMetric(c.dlq, prometheus.GaugeValue, float64(q.DLQMessages))
	for _, queue := range []string{"chat", "batch"} {
		age := 0.0
		if t, ok := q.OldestQueued[queue]; ok {
			age = max(now.Sub(t).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, queue)
	}
	ch <- prometheus.MustNewConstMetric(c.unfinished, prometheus.GaugeValue, float64(q.Unfinished))
	if !q.NextDeadline.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.margin, prometheus.GaugeValue, q.NextDeadline.Sub(now).Seconds())
	}
	up := 0.0
	if q.Up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

// WatchQueues registers the queue metrics, read from r at each scrape (bounded by
// timeout). Call it once per process.
func (m *Metrics) WatchQueues(r QueueReader, timeout time.Duration) {
	m.queues = newQueueCollector(r, timeout)
	m.Registry.MustRegister(m.queues)
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names lists every metric name this package defines (whether or not it has been
// observed yet), with the series a histogram adds (_bucket, _sum, _count), sorted:
// what dashboards and alert rules may refer to (deploy/deploy_test.go checks them).
func (m *Metrics) Names() []string {
	var out []string
	add := func(c prometheus.Collector, histogram bool) {
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if match := descName.FindStringSubmatch(d.String()); match != nil {
				out = append(out, match[1])
				if histogram {
					out = append(out, match[1]+"_bucket", match[1]+"_sum", match[1]+"_count")
				}
			}
		}
	}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() || (f.Kind() == reflect.Pointer || f.Kind() == reflect.Interface) && f.IsNil() {
			continue
		}
		switch c := f.Interface().(type) {
		case prometheus.Histogram, *prometheus.HistogramVec:
			add(c.(prometheus.Collector), true)
		case prometheus.Collector:
			add(c, false)
		}
	}
	add(newQueueCollector(nil, 0), false)
	if mfs, err := m.Registry.Gather(); err == nil { // the Go and process collectors
		for _, mf := range mfs {
			out = append(out, mf.GetName())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
