package bus

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Subjects, streams and durable consumer names are an API: a subject carries a version
// (v1), and a durable consumer's name is never changed (a new name reprocesses a
// stream from its start). deploy/nats/ holds the same definitions for operators;
// TestDeployFilesMatch keeps the two in step.
const (
	SubjectChatJob   = "fleet.jobs.v1.chat"        // new chat jobs: lanes below it (lanes.go); itself the family consumer's
	SubjectExpand    = "fleet.jobs.v1.expand"      // a batch to turn into jobs
	SubjectResearch  = "fleet.jobs.v1.research"    // a research run's next step
	SubjectResume    = "fleet.chat.v1.resume"      // finished server-tool calls: lanes below it; itself the family consumer's
	subjectSearch    = "fleet.search.v1."          // + engine id (the family consumer's), + "." + band + "." + tenant (lanes)
	SubjectFetch     = "fleet.fetch.v1.pages"      // web_fetch calls (one subject: no engines)
	subjectEvents    = "fleet.events.v2."          // + job id + "." + event type, or ".end"
	SubjectWebhook   = "fleet.webhooks.v1.deliver" // callback deliveries
	subjectDLQ       = "fleet.dlq.v1."             // + stream + "." + consumer
	subjectStream    = "fleet.stream.v1."          // + job id: token deltas, plain NATS
	SubjectSearchAll = subjectSearch + "*"
	subjectLanesAll  = ".>"
	SubjectEventsAll = subjectEvents + "*.*"
	SubjectEndsAll   = subjectEvents + "*.end"
	SubjectDLQAll    = subjectDLQ + ">"
)

// Stream names.
const (
	StreamJobs     = "JOBS"
	StreamChat     = "CHAT"
	StreamSearch   = "SEARCH"
	StreamEvents   = "EVENTS"
	StreamWebhooks = "WEBHOOKS"
	StreamDLQ      = "DLQ"
)

// Durable consumer names.
const (
	ConsumerChat     = "chatworker"
	ConsumerResume   = "chatworker-resume"
	ConsumerWebhooks = "webhooks"
	ConsumerExpand   = "batch-expander"
	ConsumerFinisher = "finisher"
	ConsumerResearch = "researcher"    // research runs' steps, in the chat workers' processes
	consumerSearch   = "searchworker-" // + engine id
	ConsumerFetch    = "fetchworker"   // web_fetch calls, in the search workers' processes
)

// BucketFiles is the JetStream object store holding uploaded batch input files and
// the output and error files of batches.
const BucketFiles = "FLEET_FILES"

// BucketRecords is the JetStream key-value bucket holding the durable records of
// ended jobs (request, answer, trace, hop turns, recorded searches, stored Responses
// objects) for the retention period; Redis keeps only a job's hot fields (records.go).
const BucketRecords = "FLEET_RECORDS"

// SubjectSearch is the subject that carries web_search calls for one engine.
func SubjectSearch(engine string) string { return subjectSearch + engine }

// SubjectStream is the plain-NATS subject of one job's streamed token deltas.
func SubjectStream(jobID string) string { return subjectStream + jobID }

// SubjectDLQ is where a consumer's dead letters go.
func SubjectDLQ(stream, consumer string) string { return subjectDLQ + stream + "." + consumer }

// ConsumerSearch is the durable consumer of one engine's searches.
func ConsumerSearch(engine string) string { return consumerSearch + engine }

// DuplicateWindow is how long the streams remember a Nats-Msg-Id. It bounds how late a
// republished message can still be recognised as a duplicate: longer than any
// redelivery cycle of a step (MaxDeliver × AckWait of the slowest consumer is ~5 min).
const DuplicateWindow = 10 * time.Minute

// Limits sizes the streams. The zero value means the defaults of DefaultLimits.
type Limits struct {
	// Replicas is the stream replica count: 1 for a single server, 3 in a cluster.
	Replicas int
	// MaxQueued bounds each work queue; a publish beyond it fails, which ingress turns
	// into 503 (back-pressure instead of an unbounded backlog).
	MaxQueued int64
	// EventsMaxAge is how long lifecycle events are kept.
	EventsMaxAge time.Duration
	// EventsMaxBytes bounds the event stream; the oldest events go first.
	EventsMaxBytes int64
	// DLQMaxAge is how long dead letters are kept for operators.
	DLQMaxAge time.Duration
	// Storage is file storage (durable) unless Memory is set (benchmarks, tests).
	Memory bool
}

// memoryEventsMaxBytes bounds the event stream kept in memory (Limits.Memory).
const memoryEventsMaxBytes = 256 << 20

// DefaultLimits are the limits used when a field of Limits is zero.
var DefaultLimits = Limits{
	Replicas:       1,
	MaxQueued:      1_000_000,
	EventsMaxAge:   24 * time.Hour,
	EventsMaxBytes: 4 << 30,
	DLQMaxAge:      14 * 24 * time.Hour,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.Memory && (l.EventsMaxBytes == 0 || l.EventsMaxBytes > memoryEventsMaxBytes) {
		// Memory is reserved up front: the file-storage bound (FLEET_EVENTS_MAX_BYTES,
		// 4 GiB by default) would not fit the embedded server's.
		l.EventsMaxBytes = memoryEventsMaxBytes
	}
	if l.Replicas == 0 {
		l.Replicas = d.Replicas
	}
	if l.MaxQueued == 0 {
		l.MaxQueued = d.MaxQueued
	}
	if l.EventsMaxAge == 0 {
		l.EventsMaxAge = d.EventsMaxAge
	}
	if l.EventsMaxBytes == 0 {
		l.EventsMaxBytes = d.EventsMaxBytes
	}
	if l.DLQMaxAge == 0 {
		l.DLQMaxAge = d.DLQMaxAge
	}
	return l
}

// Streams returns the fleet's stream configurations.
func Streams(l Limits) []jetstream.StreamConfig {
	l = l.withDefaults()
	storage := jetstream.FileStorage
	if l.Memory {
		storage = jetstream.MemoryStorage
	}
	workQueue := func(name, desc string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    subjects,
			Retention:   jetstream.WorkQueuePolicy,
			Discard:     jetstream.DiscardNew,
			MaxMsgs:     l.MaxQueued,
			Storage:     storage,
			Replicas:    l.Replicas,
			Duplicates:  DuplicateWindow,
		}
	}
	return []jetstream.StreamConfig{
		workQueue(StreamJobs, "new chat jobs (one lane per band and tenant, batch lines per batch), batches to expand and research runs' steps (lanes likewise)",
			SubjectChatJob, SubjectExpand, SubjectResearch, prefixJobLanes+subjectLanesAll, SubjectResearch+subjectLanesAll),
		workQueue(StreamChat, "finished server-tool calls to fold back into their chains (one lane per band and tenant)",
			SubjectResume, prefixResumeLanes+subjectLanesAll),
		workQueue(StreamSearch, "web_search calls, one subject per engine and lanes per band and tenant below it, and web_fetch calls",
			SubjectSearchAll, SubjectSearchAll+subjectLanesAll, SubjectFetch),
		{
			Name:        StreamEvents,
			Description: "job lifecycle events, the durable record of each job's progress",
			Subjects:    []string{SubjectEventsAll},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      l.EventsMaxAge,
			MaxBytes:    l.EventsMaxBytes,
			Storage:     storage,
			Replicas:    l.Replicas,
			Duplicates:  DuplicateWindow,
			AllowDirect: true, // TerminalEvent reads a job's ending in one request
		},
		workQueue(StreamWebhooks, "callback deliveries", SubjectWebhook),
		{
			Name:        StreamDLQ,
			Description: "dead letters: poison and exhausted messages with reason, subject, consumer and deliveries",
			Subjects:    []string{SubjectDLQAll},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      l.DLQMaxAge,
			Storage:     storage,
			Replicas:    l.Replicas,
			Duplicates:  DuplicateWindow,
		},
	}
}

// ConsumerSpec is a durable consumer and the stream it reads.
type ConsumerSpec struct {
	Stream string
	Config jetstream.ConsumerConfig
}

// Timing are a consumer's delivery settings.
type Timing struct {
	// AckWait is how long a delivery may go unacknowledged before it is redelivered.
	// Long work keeps its message alive with InProgress heartbeats, so AckWait only
	// bounds how quickly a dead worker's message moves on.
	AckWait time.Duration
	// MaxDeliver bounds attempts; after the last, the message is dead-lettered.
	MaxDeliver int
	// MaxAckPending bounds messages in flight across all workers of the consumer.
	MaxAckPending int
}

// DefaultTiming are the consumer settings unless configured otherwise. Webhook
// deliveries held back by a fairness cap are redelivered without being attempted, so
// their handler counts attempts and gives up itself (MaxDeliver unlimited), and the
// held-back ones stay pending (MaxAckPending far above the delivery pool).
var DefaultTiming = map[string]Timing{
	ConsumerChat:     {AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 4096},
	ConsumerResume:   {AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 4096},
	ConsumerWebhooks: {AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 16384},
	ConsumerExpand:   {AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 16},
	ConsumerFinisher: {AckWait: 30 * time.Second, MaxDeliver: 20, MaxAckPending: 1024},
	ConsumerResearch: {AckWait: 30 * time.Second, MaxDeliver: -1, MaxAckPending: 1024}, // a provider agent's run is polled by redelivery
	consumerSearch:   {AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 1024},
	ConsumerFetch:    {AckWait: 30 * time.Second, MaxDeliver: 5, MaxAckPending: 1024},
}

func consumer(stream, name, filter, desc string, t Timing) ConsumerSpec {
	return ConsumerSpec{Stream: stream, Config: jetstream.ConsumerConfig{
		Durable:       name,
		Description:   desc,
		FilterSubject: filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       t.AckWait,
		MaxDeliver:    t.MaxDeliver,
		MaxAckPending: t.MaxAckPending,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}}
}

// ChatConsumer reads interactive chat jobs.
func ChatConsumer(t Timing) ConsumerSpec {
	return consumer(StreamJobs, ConsumerChat, SubjectChatJob, "chat workers: interactive jobs", t)
}

// ResumeConsumer reads finished server-tool calls.
func ResumeConsumer(t Timing) ConsumerSpec {
	return consumer(StreamChat, ConsumerResume, SubjectResume, "chat workers: resume chains with tool results", t)
}

// SearchConsumer reads one engine's web_search calls; every search worker serving the
// engine shares it.
func SearchConsumer(engine string, t Timing) ConsumerSpec {
	return consumer(StreamSearch, ConsumerSearch(engine), SubjectSearch(engine), "search workers: engine "+engine, t)
}

// FetchConsumer reads web_fetch calls; every search worker process shares it (the
// fetch pool is the search workers' pool).
func FetchConsumer(t Timing) ConsumerSpec {
	return consumer(StreamSearch, ConsumerFetch, SubjectFetch, "search workers: web_fetch pages", t)
}

// ExpandConsumer reads batches to turn into jobs.
func ExpandConsumer(t Timing) ConsumerSpec {
	return consumer(StreamJobs, ConsumerExpand, SubjectExpand, "turn batches into batch jobs", t)
}

// WebhookConsumer reads callback deliveries.
func WebhookConsumer(t Timing) ConsumerSpec {
	return consumer(StreamWebhooks, ConsumerWebhooks, SubjectWebhook, "webhook delivery", t)
}

// FinisherConsumer reads terminal job events and runs the jobs' finish hooks
// (webhooks, batch counts).
func FinisherConsumer(t Timing) ConsumerSpec {
	return consumer(StreamEvents, ConsumerFinisher, SubjectEndsAll, "finish hooks of ended jobs: webhooks, batch counts", t)
}

// ResearchConsumer reads research runs' steps (planner, children's fan-in, reflection,
// writer, verification); the chat worker processes share it.
func ResearchConsumer(t Timing) ConsumerSpec {
	return consumer(StreamJobs, ConsumerResearch, SubjectResearch, "chat workers: research runs' steps", t)
}

// TimingFor returns the default timing of a consumer name (search consumers share one).
func TimingFor(name string) Timing {
	if strings.HasPrefix(name, consumerSearch) {
		return DefaultTiming[consumerSearch]
	}
	return DefaultTiming[name]
}
