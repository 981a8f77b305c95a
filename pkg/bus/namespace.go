package bus

import (
	"fmt"
	"regexp"
	"strings"
)

// A namespace (FLEET_NAMESPACE) lets several fleets, or a fleet and another
// application, share one NATS server. The definitions in subjects.go stay the
// un-namespaced names every call site uses; the Bus applies its namespace where it
// meets the server:
//
//   - subjects get the namespace as a first token: "team-a.fleet.jobs.v1.chat";
//   - streams, durable consumers and object stores get it with a dash:
//     "team-a-JOBS", "team-a-chatworker", "team-a-FLEET_FILES".
//
// and strips it from what it hands back (a delivery's subject, a dead letter's
// stream and consumer). The empty namespace is the names of subjects.go exactly, so a
// fleet deployed before namespaces keeps its streams and consumers.

var validNamespace = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// ValidateNamespace reports whether ns can prefix the fleet's names: empty (no
// namespace), or 1-32 letters, digits, '-' or '_' (no '.', which separates subject
// tokens, and nothing a stream or object store name refuses).
func ValidateNamespace(ns string) error {
	if ns == "" || validNamespace.MatchString(ns) {
		return nil
	}
	return fmt.Errorf("namespace %q: use 1-32 letters, digits, '-' or '_'", ns)
}

// SubjectIn is subject in namespace ns.
func SubjectIn(ns, subject string) string {
	if ns == "" {
		return subject
	}
	return ns + "." + subject
}

// NameIn is a stream, durable consumer or object store name in namespace ns.
func NameIn(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "-" + name
}

// Option configures a connection (Connect, Embedded.Connect).
type Option func(*Bus)

// WithNamespace puts the connection's streams, consumers, subjects and object stores
// in namespace ns (see ValidateNamespace; Connect refuses an invalid one).
func WithNamespace(ns string) Option { return func(b *Bus) { b.ns = ns } }

// Namespace is the bus's namespace ("" for none).
func (b *Bus) Namespace() string { return b.ns }

// Subject is subject in the bus's namespace (the helpers of conn.go apply it).
func (b *Bus) Subject(subject string) string { return SubjectIn(b.ns, subject) }

// Name is a stream, durable consumer or object store name in the bus's namespace:
// what the server knows it by (the helpers of conn.go apply it).
func (b *Bus) Name(name string) string { return NameIn(b.ns, name) }

// localSubject strips the namespace from a subject the server delivered.
func (b *Bus) localSubject(subject string) string {
	if b.ns == "" {
		return subject
	}
	return strings.TrimPrefix(subject, b.ns+".")
}

// localName strips the namespace from a stream or consumer name.
func (b *Bus) localName(name string) string {
	if b.ns == "" {
		return name
	}
	return strings.TrimPrefix(name, b.ns+"-")
}

// subjects maps local subjects into the namespace.
func (b *Bus) subjects(ss []string) []string {
	if b.ns == "" || ss == nil {
		return ss
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = b.Subject(s)
	}
	return out
}
