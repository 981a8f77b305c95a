package batch

// keyKind names one kind of Redis key of this package.
type keyKind int

// The Redis keys of batches and files. Every one is built by key, and nowhere else.
const (
	// keyBatch is a batch's record (a hash): status, timestamps, counters, cursor.
	keyBatch keyKind = iota
	// keyDone maps a batch's line index to how its job ended (a hash): "c" completed,
	// "f" failed, "x" cancelled, "e" expired. HSETNX on it makes counting a finished
	// job idempotent.
	keyDone
	// keyIDs maps a batch's line index to its custom_id (a hash), written when the
	// batch is created, so the output files never need the input file again.
	keyIDs
	// keyLease is held by the one process driving a batch (expansion, cancel sweep,
	// finalization) at a time.
	keyLease
	// keyTenantBatches is a tenant's batches by creation time (a sorted set).
	keyTenantBatches
	// keyFile is a file's metadata (a hash): tenant, bytes, filename, purpose.
	keyFile
	// keyTenantFiles is a tenant's files by creation time (a sorted set).
	keyTenantFiles
	// keyActive is the set of batches that have not ended, for the sweeper.
	keyActive
)

// keyTemplates are the key shapes; "%" is replaced by the {hash-tagged} id. A batch's
// keys share the batch id as hash tag, so its scripts touch one Redis Cluster slot.
var keyTemplates = [...]string{
	keyBatch:         "batch:%",
	keyDone:          "batch:%:done",
	keyIDs:           "batch:%:ids",
	keyLease:         "batch:%:lease",
	keyTenantBatches: "batches:%",
	keyFile:          "file:%",
	keyTenantFiles:   "files:%",
	keyActive:        "active-batches",
}

// key builds the Redis key of a kind for id (a batch id, a file id or a tenant; the
// active set has none), under the store's prefix: e.g. "sf:batch:{batch_abc}:done".
func key(prefix string, kind keyKind, id string) string {
	t := keyTemplates[kind]
	for i := 0; i < len(t); i++ {
		if t[i] == '%' {
			return prefix + ":" + t[:i] + "{" + id + "}" + t[i+1:]
		}
	}
	return prefix + ":" + t
}
