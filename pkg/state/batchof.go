package state

import "sync"

// jobBatches remembers, in this process, the batch of each job it met lately (""
// for none). A job's batch is written when the job is created and never changes, so
// an entry is never stale: a search worker that read it with the job's status
// (StartSearch) reserves spend and records its result without reading the job record
// again. Two generations bound it: when the newer is full it becomes the older and
// the older is dropped.
type jobBatches struct {
	mu       sync.Mutex
	cur, old map[string]string
}

// jobBatchesKept is how many jobs a generation holds: a worker's calls in flight
// fit in one many times over.
const jobBatchesKept = 4096

func (c *jobBatches) get(jobID string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.cur[jobID]; ok {
		return b, true
	}
	b, ok := c.old[jobID]
	return b, ok
}

func (c *jobBatches) put(jobID, batch string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) >= jobBatchesKept {
		c.old, c.cur = c.cur, nil
	}
	if c.cur == nil {
		c.cur = make(map[string]string, jobBatchesKept)
	}
	c.cur[jobID] = batch
}
