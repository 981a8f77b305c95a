package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Priority bands. Every job has one (state.Job.Band): synchronous and streamed
// requests run in BandSync, /v1/jobs and background Responses in BandAsync, batch
// lines in BandBatch. A worker takes the next message of the highest band that has
// one for a tenant below its share (fair.go); a request may lower its band, never
// raise it (LowerBand).
const (
	BandSync  = "sync"
	BandAsync = "async"
	BandBatch = "batch"
)

// Bands are the priority bands, highest first.
var Bands = []string{BandSync, BandAsync, BandBatch}

// HeaderPriority is the request header with which a client lowers its request's band.
const HeaderPriority = "X-Searchfleet-Priority"

// BandRank is a band's place in Bands (0 is the highest); an unknown band ranks
// as BandAsync.
func BandRank(band string) int {
	switch band {
	case BandSync:
		return 0
	case BandBatch:
		return 2
	}
	return 1
}

// LowerBand is the band a request of band given asks for with requested (the
// X-Searchfleet-Priority header): requested when it is a known band no higher than
// given, else given. ok is false when requested is set but names no band.
func LowerBand(given, requested string) (band string, ok bool) {
	requested = strings.ToLower(strings.TrimSpace(requested))
	switch requested {
	case "":
		return given, true
	case BandSync, BandAsync, BandBatch:
		if BandRank(requested) > BandRank(given) {
			return requested, true
		}
		return given, true
	}
	return given, false
}

// A lane is the part of a work queue that holds one tenant's messages of one band
// (and, for batch lines, one batch): its own subject, read by its own durable
// consumer, so what a tenant has queued waits in the stream until a worker takes it
// from that lane (fair.go).
//
//	fleet.jobs.v1.chat.<band>.<tenant>[.<batch>]   new chat jobs (batch lines name their batch)
//	fleet.chat.v1.resume.<band>.<tenant>           finished server-tool calls
//	fleet.search.v1.<engine>.<band>.<tenant>       web_search calls for one engine
//	fleet.jobs.v1.research.<band>.<tenant>[.<batch>] research runs' steps (a batch line's run names its batch)
//
// Tenants and batch ids are subject tokens (Token).
const (
	prefixJobLanes    = SubjectChatJob
	prefixResumeLanes = SubjectResume
)

// SubjectJob is the lane subject of a new chat job. batch is the batch id of a batch
// line ("" for any other job).
func SubjectJob(band, tenant, batch string) string {
	s := prefixJobLanes + "." + orBand(band) + "." + Token(tenant)
	if batch != "" {
		s += "." + Token(batch)
	}
	return s
}

// SubjectResearchOf is the lane subject of a step of a research run of tenant in
// band; batch is the batch id of a batch line's run ("" for any other run).
func SubjectResearchOf(band, tenant, batch string) string {
	s := SubjectResearch + "." + orBand(band) + "." + Token(tenant)
	if batch != "" {
		s += "." + Token(batch)
	}
	return s
}

// SubjectJobsOf matches every lane of new chat jobs in band.
func SubjectJobsOf(band string) string { return prefixJobLanes + "." + band + subjectLanesAll }

// SubjectResumeOf is the lane subject of a finished server-tool call of a job of
// tenant in band.
func SubjectResumeOf(band, tenant string) string {
	return prefixResumeLanes + "." + orBand(band) + "." + Token(tenant)
}

// SubjectSearchOf is the lane subject of a web_search call for engine by a job of
// tenant in band.
func SubjectSearchOf(engine, band, tenant string) string {
	return subjectSearch + engine + "." + orBand(band) + "." + Token(tenant)
}

// orBand is band, or BandAsync for a message that names none (a job made without
// one), so its subject is still a lane's.
func orBand(band string) string {
	if band == "" {
		return BandAsync
	}
	return band
}

// Token is s as one subject token: itself when it is short and made of letters,
// digits, '-' and '_', else "h" and a hash of it; "-" for "".
func Token(s string) string {
	if s == "" {
		return "-"
	}
	if len(s) <= 64 && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(sum[:12])
}

// Lane is where a lane subject leads: its band, the tenant's token and, for a batch
// line, the batch's.
type Lane struct {
	Band, Tenant, Key string
}

// LaneOf parses a lane subject under prefix; ok is false for any other subject.
func LaneOf(prefix, subject string) (l Lane, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix+".")
	if !found {
		return Lane{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Lane{}, false
	}
	l = Lane{Band: parts[0], Tenant: parts[1]}
	if len(parts) == 3 {
		l.Key = parts[2]
	}
	return l, true
}

// laneSep separates a family's durable name from the lane in a lane consumer's
// name: chatworker__sync_acme. Dead letters of a lane consumer are filed under its
// family (familyOf), so the DLQ consumers' filters need not know the lanes.
const laneSep = "__"

func laneConsumer(family string, l Lane) string {
	n := family + laneSep + l.Band + "_" + l.Tenant
	if l.Key != "" {
		n += "_" + l.Key
	}
	return n
}

// familyOf is the family name of a lane consumer's name; any other name is its own.
func familyOf(name string) string {
	f, _, _ := strings.Cut(name, laneSep)
	return f
}
