package bus

import (
	"errors"
	"fmt"
	"strings"
)

// An ingress answering a synchronous request is handed the ended job by the worker
// that ended it (jobs.End), on plain NATS, no stream: on fleet.ended.v1.<ingress>.<job>,
// where <ingress> is the ingress's random instance token, so only that ingress gets
// it. It is sent before the job's terminal event on the same connection, and NATS
// keeps one publisher's order: the ingress has it when the terminal event arrives.
// Nothing relies on it: an ingress that misses it reads the job from Redis.

// SubjectEnded is the subject that hands jobID's ended record to ingress.
func SubjectEnded(ingress, jobID string) string { return subjectEnded + ingress + "." + jobID }

// SubjectEndedTo matches every ended job handed to ingress.
func SubjectEndedTo(ingress string) string { return subjectEnded + ingress + ".*" }

// EndedJob is the job whose ended record a message on subject (as this connection
// received it, in the bus's namespace) carries: "" for another subject.
func (b *Bus) EndedJob(subject string) string {
	rest, ok := strings.CutPrefix(b.localSubject(subject), subjectEnded)
	if !ok {
		return ""
	}
	_, job, _ := strings.Cut(rest, ".")
	return job
}

var errToken = errors.New("not a subject token")

// SendEnded hands an ended job's record to the ingress waiting for it (see
// SubjectEnded), without waiting: it reports false, sending nothing, when the record
// exceeds what the connection may publish (the ingress reads the job from Redis).
func (b *Bus) SendEnded(ingress, jobID string, record []byte) (sent bool, err error) {
	if !token(ingress) || !token(jobID) {
		return false, fmt.Errorf("bus: handing %q the ended job %q: %w", ingress, jobID, errToken)
	}
	if int64(len(record)) > b.nc.MaxPayload() {
		return false, nil
	}
	if err := b.nc.Publish(b.Subject(SubjectEnded(ingress, jobID)), record); err != nil {
		return false, fmt.Errorf("bus: handing over the ended job %s: %w", jobID, err)
	}
	return true, nil
}

// token reports whether s can be one subject token: not empty, without separators,
// wildcards or white space.
func token(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
