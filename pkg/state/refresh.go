package state

import (
	"sync"
	"time"
)

// refreshes remembers, in this process, when it last set the TTL of a long-lived key
// that every job writes to (a tenant's job index, its spend per model of a day), so
// that the EXPIRE rides along once per refreshEvery and key rather than with every
// write. Such a key is given its lifetime plus refreshEvery: it outlives everything
// written to it between two refreshes. A key Redis lost (a restart with an empty
// dataset) is written again without a TTL for at most refreshEvery.
type refreshes struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// refreshEvery is how often a process sets again the TTL of a key it keeps writing.
const refreshEvery = time.Minute

// refreshesKept bounds the keys remembered; past it the memory starts over (each key
// is then refreshed once more).
const refreshesKept = 4096

// due reports whether key's TTL is to be set now, and if so counts it as set.
func (r *refreshes) due(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.last[key]; ok && now.Sub(t) < refreshEvery && !now.Before(t) {
		return false
	}
	if r.last == nil || len(r.last) >= refreshesKept {
		r.last = make(map[string]time.Time)
	}
	r.last[key] = now
	return true
}

// forget makes key's TTL due at its next write (the write that was to set it failed).
func (r *refreshes) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
}
