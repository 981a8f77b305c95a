package statefake

import (
	"context"
	"slices"
)

// The recorded results of jobs and batches by content address (state/results.go):
// the first result recorded under an address stays.

func jobRecord(id string) string   { return "job/" + id }
func batchRecord(id string) string { return "batch/" + id }

// RecordSearch implements chat.Records and search.Store.
func (m *Memory) RecordSearch(_ context.Context, jobID, addr string, result []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recordResult(jobID, addr, result)
	return nil
}

// recordResult records result under addr in jobID's record and its batch's; m.mu is held.
func (m *Memory) recordResult(jobID, addr string, result []byte) {
	batch := m.batchOf(jobID)
	keys := []string{jobRecord(jobID)}
	if batch != "" {
		keys = append(keys, batchRecord(batch))
	}
	for _, k := range keys {
		r, ok := m.records[k]
		if !ok {
			r = map[string][]byte{}
			m.records[k] = r
		}
		if _, ok := r[addr]; !ok {
			r[addr] = slices.Clone(result)
		}
	}
}

// RecordedSearches implements chat.Records.
func (m *Memory) RecordedSearches(_ context.Context, jobID string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range m.records[jobRecord(jobID)] {
		out[k] = slices.Clone(v)
	}
	return out, nil
}

// RecordedSearch implements chat.Records.
func (m *Memory) RecordedSearch(_ context.Context, jobID, batchID string, addrs []string) (found map[string][]byte, inBatch map[string]bool, err error) {
	if len(addrs) == 0 {
		return nil, nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := []string{jobRecord(jobID)}
	if batchID != "" {
		keys = append(keys, batchRecord(batchID))
	}
	found, inBatch = map[string][]byte{}, map[string]bool{}
	for i, k := range keys {
		for _, a := range addrs {
			if v, ok := m.records[k][a]; ok && found[a] == nil {
				found[a], inBatch[a] = slices.Clone(v), i > 0
			}
		}
	}
	return found, inBatch, nil
}
