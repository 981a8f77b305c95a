package statefake

import (
	"context"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// Batches (state/batch.go, index.go, ports.go): a batch's record, its lines' custom ids
// and outcomes, which expire together (the completion window plus the retention; the
// retention once the batch ended), its driver's lease, and the active set and tenants'
// lists, which keep ids until they are forgotten.

type memBatch struct {
	b     *state.Batch
	ids   map[int]string
	done  map[int]string
	until time.Time // when its keys expire
}

// msTime is t as Redis gives it back: whole milliseconds, UTC (zero stays zero).
func msTime(t time.Time) time.Time {
	if t.IsZero() || t.UnixMilli() == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// nowMS is the time the scripts stamp: now, in whole milliseconds.
func nowMS() time.Time { return msTime(time.Now()) }

// batch returns a live batch (nil: none, or expired, which it then drops). m.mu is held.
func (m *Memory) batch(id string) *memBatch {
	mb, ok := m.batches[id]
	if !ok {
		return nil
	}
	if !time.Now().Before(mb.until) {
		delete(m.batches, id)
		return nil
	}
	return mb
}

// copyBatch is a deep copy of a stored batch.
func copyBatch(b *state.Batch) *state.Batch {
	c := *b
	if b.Metadata != nil {
		c.Metadata = maps.Clone(b.Metadata)
	}
	c.Callback = clone(b.Callback)
	c.Errors = slices.Clone(b.Errors)
	return &c
}

// CreateBatch implements batch.Store: the fields a new batch is stored with (no
// counts, no ends; its progress starts at its creation), its custom ids, its place in
// the tenant's list and the active set.
func (m *Memory) CreateBatch(_ context.Context, b *state.Batch, customIDs []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &state.Batch{ID: b.ID, Tenant: b.Tenant, Status: b.Status, Endpoint: b.Endpoint, InputFileID: b.InputFileID,
		Window: b.Window, Model: b.Model, Created: msTime(b.Created), Expires: msTime(b.Expires), ProgressAt: msTime(b.Created),
		Total: b.Total}
	if b.Metadata != nil {
		c.Metadata = maps.Clone(b.Metadata)
	}
	if len(b.Callback) > 0 {
		c.Callback = clone(b.Callback)
	}
	ids := make(map[int]string, len(customIDs))
	for i, id := range customIDs {
		ids[i] = id
	}
	m.batches[b.ID] = &memBatch{b: c, ids: ids, done: map[int]string{}, until: b.Expires.Add(m.Retention)}
	list, ok := m.tenantBatches[b.Tenant]
	if !ok {
		list = map[string]time.Time{}
		m.tenantBatches[b.Tenant] = list
	}
	list[b.ID] = msTime(b.Created)
	m.active[b.ID] = true
	return nil
}

// GetBatch implements batch.Store and webhook.Store.
func (m *Memory) GetBatch(_ context.Context, id string) (*state.Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.batch(id)
	if mb == nil {
		return nil, state.ErrNotFound
	}
	return copyBatch(mb.b), nil
}

// BatchStatus implements batch.Store ("" for no batch).
func (m *Memory) BatchStatus(_ context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.batch(id); mb != nil {
		return mb.b.Status, nil
	}
	return "", nil
}

// BatchOutcomes implements batch.Store.
func (m *Memory) BatchOutcomes(_ context.Context, id string) (map[int]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.batch(id); mb != nil {
		return maps.Clone(mb.done), nil
	}
	return map[int]string{}, nil
}

// BatchCustomIDs implements batch.Store.
func (m *Memory) BatchCustomIDs(_ context.Context, id string) (map[int]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.batch(id); mb != nil {
		return maps.Clone(mb.ids), nil
	}
	return map[int]string{}, nil
}

// resolved is resolvedLua: a batch whose every expanded line has an outcome, after its
// expansion stopped, moves from in progress (or validating) to finalizing; it reports
// whether the caller should see the batch finalized.
func resolved(b *state.Batch, now time.Time) bool {
	if !b.Resolved() {
		return false
	}
	switch b.Status {
	case state.BatchInProgress, state.BatchValidating:
		b.Status, b.FinalizingAt = state.BatchFinalizing, now
		return true
	case state.BatchFinalizing, state.BatchCancelling:
		return true
	}
	return false
}

// CountBatchLine implements batch.Store: the first outcome of a line is counted (even
// once the batch ended, as the script does), later ones change nothing.
func (m *Memory) CountBatchLine(_ context.Context, id string, i int, outcome string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.batch(id)
	if mb == nil {
		return false, nil
	}
	if _, ok := mb.done[i]; ok {
		return false, nil
	}
	mb.done[i] = outcome
	b, now := mb.b, nowMS()
	b.Ended++
	switch outcome {
	case state.LineCompleted:
		b.Completed++
	case state.LineFailed:
		b.Failed++
	}
	b.ProgressAt = now
	return resolved(b, now), nil
}

// AdvanceBatch implements batch.Store: the cursor never moves back.
func (m *Memory) AdvanceBatch(_ context.Context, id string, cursor int, done bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.batch(id)
	if mb == nil {
		return false, nil
	}
	b, now := mb.b, nowMS()
	if b.Status == state.BatchValidating {
		b.Status, b.InProgressAt = state.BatchInProgress, now
	}
	b.Expanded = max(b.Expanded, cursor)
	b.ProgressAt = now
	if !done {
		return false, nil
	}
	b.ExpandDone = true
	return resolved(b, now), nil
}

// CancelBatch implements batch.Store.
func (m *Memory) CancelBatch(_ context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.batch(id)
	if mb == nil {
		return "", nil
	}
	b := mb.b
	if b.Status == state.BatchValidating || b.Status == state.BatchInProgress {
		now := nowMS()
		b.Status, b.CancellingAt, b.ProgressAt = state.BatchCancelling, now, now
	}
	return b.Status, nil
}

// terminal is the statuses finishBatch never moves a batch from.
func terminal(st string) bool {
	switch st {
	case state.BatchCompleted, state.BatchFailed, state.BatchExpired, state.BatchCancelled:
		return true
	}
	return false
}

// statusAt is the batch's <status>_at field (nil for a status without one).
func statusAt(b *state.Batch, status string) *time.Time {
	switch status {
	case state.BatchInProgress:
		return &b.InProgressAt
	case state.BatchFinalizing:
		return &b.FinalizingAt
	case state.BatchCompleted:
		return &b.CompletedAt
	case state.BatchFailed:
		return &b.FailedAt
	case state.BatchExpired:
		return &b.ExpiredAt
	case state.BatchCancelling:
		return &b.CancellingAt
	case state.BatchCancelled:
		return &b.CancelledAt
	}
	return nil
}

// FinishBatch implements batch.Store: the first final status stands; the batch leaves
// the active set, its keys expire after the retention and its recorded searches go.
func (m *Memory) FinishBatch(_ context.Context, id, status string, end state.BatchEnd) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.batch(id)
	if mb == nil || terminal(mb.b.Status) {
		return false, nil
	}
	b, now := mb.b, nowMS()
	b.Status, b.ProgressAt = status, now
	if at := statusAt(b, status); at != nil {
		*at = now
	}
	if end.OutputFileID != "" || end.ErrorFileID != "" {
		b.OutputFileID, b.ErrorFileID = end.OutputFileID, end.ErrorFileID
	}
	if len(end.Errors) > 0 {
		b.Errors = slices.Clone(end.Errors)
	}
	mb.until = time.Now().Add(m.Retention)
	delete(m.records, batchRecord(id))
	delete(m.active, id)
	return true, nil
}

// SetBatchWebhook implements batch.Store and webhook.Store: a batch that is gone stays
// gone.
func (m *Memory) SetBatchWebhook(_ context.Context, id, to string, from ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb := m.batch(id); mb != nil {
		mb.b.Webhook, _ = move(mb.b.Webhook, to, from)
	}
	return nil
}

func batchLeaseKey(id string) string { return "batch-driver/" + id }

// HoldBatch implements batch.Store: the driver's lease does not lapse until released
// (state.Store.Hold renews it); release(true) deletes it, release(false) lets it lapse
// after ttl.
func (m *Memory) HoldBatch(_ context.Context, id, owner string, ttl time.Duration) (func(drop bool), time.Duration, error) {
	key := batchLeaseKey(id)
	m.mu.Lock()
	if left := m.lease(key, owner, ttl); left > 0 {
		m.mu.Unlock()
		return nil, left, nil
	}
	m.leases[key].kept = true
	m.mu.Unlock()
	return m.releaser(key, owner, ttl), 0, nil
}

// ActiveBatches implements batch.Store.
func (m *Memory) ActiveBatches(_ context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.active)), nil
}

// ForgetActiveBatch implements batch.Store.
func (m *Memory) ForgetActiveBatch(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.active, id)
	return nil
}

// TenantBatches implements batch.Store: newest first, after the cursor.
func (m *Memory) TenantBatches(_ context.Context, tenant, after string) iter.Seq2[string, error] {
	return m.index(m.tenantBatches, tenant, after, false)
}

// ForgetTenantBatch implements batch.Store.
func (m *Memory) ForgetTenantBatch(_ context.Context, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tenantBatches[tenant], id)
	return nil
}

// index is state's index over a sorted set scored by creation time (ms): by time, then
// by id, descending unless asc; the ids after the cursor (none for an unknown one).
// The list is read when iteration starts.
func (m *Memory) index(set map[string]map[string]time.Time, tenant, after string, asc bool) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		m.mu.Lock()
		list := set[tenant]
		ids := slices.Collect(maps.Keys(list))
		slices.SortFunc(ids, func(a, b string) int {
			if c := list[a].Compare(list[b]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		m.mu.Unlock()
		if !asc {
			slices.Reverse(ids)
		}
		if after != "" {
			i := slices.Index(ids, after)
			if i < 0 {
				return
			}
			ids = ids[i+1:]
		}
		for _, id := range ids {
			if !yield(id, nil) {
				return
			}
		}
	}
}

// EditBatch changes a stored batch's fields in place, as a test that writes its Redis
// hash does (moving its expiry or its last progress into the past). It reports whether
// there was such a batch. The batch's keys keep their lifetime.
func (m *Memory) EditBatch(id string, edit func(b *state.Batch)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mb := m.batch(id)
	if mb == nil {
		return false
	}
	edit(mb.b)
	return true
}

// RecordRetention implements batch.Store.
func (m *Memory) RecordRetention() time.Duration { return m.Retention }
