package bus_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

// Subjects are versioned and built by the functions of subjects.go; a search goes to
// its engine's subject and is consumed by that engine's durable consumer.
func ExampleSubjectSearch() {
	subject := bus.SubjectSearch("brave")
	fmt.Println(subject)
	fmt.Println(bus.ConsumerSearch("brave"))
	fmt.Println(bus.SubjectStream("job_123"))
	fmt.Println(bus.SubjectDLQ("SEARCH", "searchworker-brave"))
	// Output:
	// fleet.search.v1.brave
	// searchworker-brave
	// fleet.stream.v1.job_123
	// fleet.dlq.v1.SEARCH.searchworker-brave
}

// A namespace puts a whole fleet's names beside another's on one NATS server:
// subjects get it as a first token, streams and consumers with a dash. The empty
// namespace leaves every name as it is.
func ExampleSubjectIn() {
	fmt.Println(bus.SubjectIn("team-a", bus.SubjectChatJob))
	fmt.Println(bus.NameIn("team-a", "JOBS"))
	fmt.Println(bus.SubjectIn("", bus.SubjectChatJob))
	fmt.Println(bus.ValidateNamespace("team.a"))
	// Output:
	// team-a.fleet.jobs.v1.chat
	// team-a-JOBS
	// fleet.jobs.v1.chat
	// namespace "team.a": use 1-32 letters, digits, '-' or '_'
}

// Decide is the one table from a handler's outcome to what the consumer does with
// the message: ack, nak with a delay, or term and dead-letter.
func ExampleDecide() {
	const maxDeliver = 5
	engineDown := errors.New("engine unavailable")
	for _, c := range []struct {
		name    string
		err     error
		attempt int
	}{
		{"done", nil, 1},
		{"transient, first try", engineDown, 1},
		{"transient, third try", engineDown, 3},
		{"rate-limited", bus.Retry(7*time.Second, engineDown), 2},
		{"permanent", bus.Permanent(errors.New("bad arguments")), 1},
		{"undecodable", fmt.Errorf("decoding: %w", bus.ErrUndecodable), 1},
		{"last delivery", engineDown, maxDeliver},
	} {
		d := bus.Decide(c.err, c.attempt, maxDeliver)
		fmt.Printf("%s: %s %v %q\n", c.name, d.Action, d.Delay, d.Reason)
	}
	// Output:
	// done: ack 0s ""
	// transient, first try: nak 1s ""
	// transient, third try: nak 4s ""
	// rate-limited: nak 7s ""
	// permanent: term+dlq 0s "permanent: bad arguments"
	// undecodable: term+dlq 0s "decoding: undecodable message"
	// last delivery: term+dlq 0s "failed all 5 deliveries: engine unavailable"
}
