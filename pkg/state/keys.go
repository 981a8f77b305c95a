package state

import (
	"strconv"
)

// Keys builds every Redis key the fleet uses; no key is spelled anywhere else. Keys of
// one job carry the job id as a {hash tag}, so a job's keys live on one Redis Cluster
// slot and can be read, written and scripted together.
type Keys struct {
	prefix string
}

// NewKeys returns the key builder for prefix (default "sf"). Tests use a unique prefix
// each, so they share one Redis without FLUSHDB.
func NewKeys(prefix string) Keys {
	if prefix == "" {
		prefix = "sf"
	}
	return Keys{prefix: prefix}
}

// NamespacePrefix is the key prefix of a fleet in namespace ns (FLEET_NAMESPACE):
// prefix (default "sf") itself without a namespace, else "<prefix>@<ns>", so
// "sf@team-a:{job}:job". A namespace holds no ':' or '@', so no key of one namespace
// is a key of another or of the un-namespaced fleet; the {job} hash tags are kept.
func NamespacePrefix(ns, prefix string) string {
	if prefix == "" {
		prefix = "sf"
	}
	if ns == "" {
		return prefix
	}
	return prefix + "@" + ns
}

// Prefix returns the key prefix.
func (k Keys) Prefix() string { return k.prefix }

// job is one of a job's keys: the job's slot ({id}, so a script may touch them all)
// and then kind, written in one concatenation (job keys are built on every step).
func (k Keys) job(id, kind string) string { return k.prefix + ":{" + id + "}" + kind }

// Job is the job record: status, timestamps, request, answer, trace, usage (a hash).
// The same hash holds the job's chain state while it runs (chain.go): per hop the
// stored model turn, the dispatched calls, the expected and recorded results; the
// sticky flag; counters. So does what the search workers keep of its calls (each
// call's stored outcome and engine fallback state) and its recorded search results by
// content address (calls.go). One read loads a step, one script stores it, and all of
// it lives and goes with the record.
func (k Keys) Job(id string) string { return k.job(id, ":job") }

// Lease is the claim of the worker currently calling the model for one hop.
func (k Keys) Lease(id string, hop int) string {
	return k.prefix + ":{" + id + "}:lease:" + strconv.Itoa(hop)
}

// searchLease is the claim of the worker currently running one search.
func (k Keys) searchLease(id string, hop int, call string) string {
	return k.prefix + ":{" + id + "}:sl:" + strconv.Itoa(hop) + ":" + call
}

// WebhookSecret is the signing secret made for a job (or batch) whose tenant has
// none. It is kept apart from the job record, which must never hold a secret.
func (k Keys) WebhookSecret(id string) string { return k.job(id, ":whsec") }

// Deadlines is the sorted set of unfinished jobs by deadline (ms), which the reaper
// sweeps so that no job stays unanswered; an ended job leaves it when the finisher
// handles its terminal event (ReadEnded).
func (k Keys) Deadlines() string { return k.prefix + ":deadlines" }

// reaperLock is held by the one worker sweeping Deadlines.
func (k Keys) reaperLock() string { return k.prefix + ":reaper" }

// stickyConversation marks a conversation whose web_search chain continues in the
// client's next request (the answer ended in client tool calls, not "stop").
func (k Keys) stickyConversation(hash string) string { return k.prefix + ":sticky:" + hash }

// idempotency maps a tenant's Idempotency-Key to its job.
func (k Keys) idempotency(tenant, key string) string {
	return k.prefix + ":idem:{" + tenant + "}:" + key
}

// rateLimit is the limiter state of one engine.
func (k Keys) rateLimit(engine string) string { return k.prefix + ":rl:{" + engine + "}" }

// searchCache is a tenant's cached result of one engine for one normalized query.
// The cache is per tenant: a hit costs no search, which the answer shows
// (searches: 0), so a cache shared across tenants would tell one tenant what another
// searched for. queryHash is of fixed length, so no tenant id makes another's key.
func (k Keys) searchCache(tenant, engine, queryHash string) string {
	return k.prefix + ":cache:{" + engine + "}:" + tenant + ":" + queryHash
}

// searchInflight is the claim of a tenant's search of one engine for one normalized
// query while it runs (its result, for the identical searches that waited, is the
// same key with ":r"): per tenant, as the cache is.
func (k Keys) searchInflight(tenant, engine, queryHash string) string {
	return k.prefix + ":inflight:{" + engine + "}:" + tenant + ":" + queryHash
}

// Batch is a batch's record (a hash): status, timestamps, counters, expansion cursor.
// A batch's keys share the batch id as hash tag, so its scripts touch one slot.
func (k Keys) Batch(id string) string { return k.prefix + ":batch:{" + id + "}" }

// BatchDone maps a batch's line index to how its job ended (a hash): "c" completed,
// "f" failed, "x" cancelled, "e" expired. HSETNX on it counts each line once.
func (k Keys) BatchDone(id string) string { return k.Batch(id) + ":done" }

// BatchIDs maps a batch's line index to its custom_id (a hash), written when the batch
// is created, so the output files never need the input file again.
func (k Keys) BatchIDs(id string) string { return k.Batch(id) + ":ids" }

// BatchLease is held by the one process driving a batch (expansion, cancel sweep,
// finalization) at a time.
func (k Keys) BatchLease(id string) string { return k.Batch(id) + ":lease" }

// TenantBatches is a tenant's batches by creation time (a sorted set).
func (k Keys) TenantBatches(tenant string) string { return k.prefix + ":batches:{" + tenant + "}" }

// File is an uploaded or produced file's metadata (a hash).
func (k Keys) File(id string) string { return k.prefix + ":file:{" + id + "}" }

// TenantFiles is a tenant's files by creation time (a sorted set).
func (k Keys) TenantFiles(tenant string) string { return k.prefix + ":files:{" + tenant + "}" }

// ActiveBatches is the set of batches that have not ended, for the sweeper.
func (k Keys) ActiveBatches() string { return k.prefix + ":active-batches" }

// tenantLeases is a tenant's semaphore of one kind (a sorted set of leases by expiry):
// its synchronous waits, open streams, unfinished jobs or unfinished batches.
func (k Keys) tenantLeases(kind, tenant string) string {
	return k.prefix + ":leases:{" + tenant + "}:" + kind
}

// tenantRate is a tenant's request rate limiter.
func (k Keys) tenantRate(tenant string) string { return k.prefix + ":rl-tenant:{" + tenant + "}" }

// tenantFileBytes maps each of a tenant's files to its size (a hash): the tenant's
// storage usage.
func (k Keys) tenantFileBytes(tenant string) string { return k.prefix + ":filebytes:{" + tenant + "}" }

// fileExpiries is every expiring file ("<id>/<tenant>") by expiry time (a sorted set).
func (k Keys) fileExpiries() string { return k.prefix + ":file-expiries" }

// keyCooldown is one engine API key's rest after the provider refused it (429,
// 401/403, 402), shared by every search worker; fp is the key's fingerprint, never
// the key. Its value is why it rests, its TTL how long.
func (k Keys) keyCooldown(engine, fp string) string {
	return k.prefix + ":keyrest:{" + engine + "}:" + fp
}

// modelKeyCooldown is one main-model provider API key's rest, shaped as keyCooldown
// but apart from the engines' ("modelkeyrest"), so a provider and an engine of one
// name never share a rest.
func (k Keys) modelKeyCooldown(provider, fp string) string {
	return k.prefix + ":modelkeyrest:{" + provider + "}:" + fp
}

// budget is the root of a tenant's spend keys. They carry the tenant as hash tag, so
// the reservation script touches one Redis Cluster slot.
func (k Keys) budget(tenant string) string { return k.prefix + ":budget:{" + tenant + "}" }

// spendDay is a tenant's spend in one UTC day ("20261124"), a hash: "usd" in
// micro-dollars and "n" searches, reservations included.
func (k Keys) spendDay(tenant, day string) string { return k.budget(tenant) + ":d:" + day }

// spendMonth is a tenant's spend in one UTC month ("202611"), shaped as spendDay.
func (k Keys) spendMonth(tenant, month string) string { return k.budget(tenant) + ":m:" + month }

// spendCalls maps each call reserved against a tenant's day to what it holds
// ("micros:searches"), so a redelivered search never reserves twice. The entries live
// in the day's own hash (spendDay) beside its counters (a call's name is never "usd"
// or "n"): they share its lifetime, and one read and one write of it reserve a call.
func (k Keys) spendCalls(tenant, day string) string { return k.spendDay(tenant, day) }

// batchSpend is a batch's spend ledger (a hash): "usd" in micro-dollars (model turns
// and searches of its jobs, reservations included), per paid call "r:<call>" what it
// holds, and "cap", the batch's
// metadata.max_cost_usd.
func (k Keys) batchSpend(id string) string { return k.Batch(id) + ":spend" }

// batchSearchRecord is the recorded search results of a batch's jobs by content
// address (a hash), so an identical search across the batch is made once.
func (k Keys) batchSearchRecord(batchID string) string { return k.Batch(batchID) + ":rec" }

// StoredResponse holds what a stored Responses answer keeps of its request (its input,
// previous turns included, and the settings it echoes), beside its job's keys.
func (k Keys) StoredResponse(id string) string { return k.job(id, ":response") }

// conversation is a conversation's record (a hash: id, tenant, created, metadata,
// item count, bytes, the next position, and a field per response that added its
// turn). A conversation's keys share its id as hash tag, so its scripts touch one
// slot.
func (k Keys) conversation(id string) string { return k.prefix + ":conv:{" + id + "}" }

// conversationItems are a conversation's items by id (a hash of JSON).
func (k Keys) conversationItems(id string) string { return k.conversation(id) + ":items" }

// conversationOrder is a conversation's item ids by position (a sorted set).
func (k Keys) conversationOrder(id string) string { return k.conversation(id) + ":order" }

// responseConversation names the conversation a stored response adds its turn to.
func (k Keys) responseConversation(id string) string { return k.job(id, ":conv") }

// deletedResponse marks a stored response deleted (DELETE /v1/responses/{id}), so
// neither Redis nor the archive gives it again.
func (k Keys) deletedResponse(id string) string { return k.job(id, ":response-deleted") }

// spendPending is a tenant's model-turn reservations of one UTC day that are not
// settled yet (a sorted set: call → when the reservation lapses, ms). A reservation
// whose worker died is released by the next reservation of the day once it lapses.
func (k Keys) spendPending(tenant, day string) string { return k.budget(tenant) + ":p:" + day }

// quota is the root of a tenant's storage quota keys (the tenant as hash tag, so the
// quota script touches one Redis Cluster slot).
func (k Keys) quota(tenant string) string { return k.prefix + ":quota:{" + tenant + "}" }

// quotaBytes is a tenant's storage ledger (a hash): "used" bytes, and per record
// ("b:<id>") the bytes it holds.
func (k Keys) quotaBytes(tenant string) string { return k.quota(tenant) + ":b" }

// quotaExpiries is a tenant's stored records by when each expires (a sorted set, ms):
// a record past its expiry is released lazily by the next quota call.
func (k Keys) quotaExpiries(tenant string) string { return k.quota(tenant) + ":x" }

// TenantJobs is a tenant's recent jobs by creation time (a sorted set, ms): the jobs
// it submitted itself, not its batches' lines, trimmed to the newest TenantJobsKept.
func (k Keys) TenantJobs(tenant string) string { return k.prefix + ":jobs:{" + tenant + "}" }

// ModelSpendDay is what a tenant's jobs that ended in one UTC day ("20261124") spent,
// per model (a hash: "usd:<model>" micro-dollars, "jobs:<model>", "searches:<model>";
// a field not there counts 0).
func (k Keys) ModelSpendDay(tenant, day string) string { return k.budget(tenant) + ":models:" + day }

// run is a research run's record (a hash): its request, status, plan, each round's
// sub-questions and counts, its children's ends, its draft and result, its spend and
// the keys of the events it appended ({id}-tagged like a job's keys).
func (k Keys) run(id string) string { return k.job(id, ":run") }

// runEvents is a research run's event list, in order; an event's id is its position
// from 1.
func (k Keys) runEvents(id string) string { return k.job(id, ":rev") }

// RunLease is the claim of the worker currently taking a research run's step.
func (k Keys) RunLease(id string) string { return k.job(id, ":rlease") }

// tenantRuns is a tenant's research runs by creation time (a sorted set, ms).
func (k Keys) tenantRuns(tenant string) string { return k.prefix + ":runs:{" + tenant + "}" }

// runShare maps a tenant's in-flight research request (by its hash) to the run that
// serves it, so an identical request shares the run.
func (k Keys) runShare(tenant, hash string) string {
	return k.prefix + ":runshare:{" + tenant + "}:" + hash
}
