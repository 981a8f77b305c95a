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

// Files (state/files.go), tenants' concurrency leases (state/limits.go) and storage
// quotas (state/quota.go).

// SaveFile implements batch.Store: the file's metadata (gone at its expiry), its place
// in its tenant's list, its bytes in its tenant's usage, and its place in the sweep's
// expiries (until DeleteFile).
func (m *Memory) SaveFile(_ context.Context, f *state.File) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := *f
	c.Created, c.Expires = msTime(f.Created), msTime(f.Expires)
	m.files[f.ID] = &c
	sub(m.tenantFiles, f.Tenant)[f.ID] = c.Created
	b, ok := m.fileBytes[f.Tenant]
	if !ok {
		b = map[string]int64{}
		m.fileBytes[f.Tenant] = b
	}
	b[f.ID] = f.Bytes
	if !f.Expires.IsZero() {
		m.fileExpiries[f.ID+"/"+f.Tenant] = c.Expires
	}
	return nil
}

// sub returns set[key], made if missing.
func sub(set map[string]map[string]time.Time, key string) map[string]time.Time {
	s, ok := set[key]
	if !ok {
		s = map[string]time.Time{}
		set[key] = s
	}
	return s
}

// GetFile implements batch.Store: state.ErrNotFound once the file expired.
func (m *Memory) GetFile(_ context.Context, id string) (*state.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[id]
	if ok && !f.Expires.IsZero() && !time.Now().Before(f.Expires) {
		delete(m.files, id)
		ok = false
	}
	if !ok {
		return nil, state.ErrNotFound
	}
	c := *f
	return &c, nil
}

// DeleteFile implements batch.Store.
func (m *Memory) DeleteFile(_ context.Context, f *state.File) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, f.ID)
	delete(m.tenantFiles[f.Tenant], f.ID)
	delete(m.fileBytes[f.Tenant], f.ID)
	delete(m.fileExpiries, f.ID+"/"+f.Tenant)
	return nil
}

// FileUsage implements batch.Store: expired files count until they are deleted.
func (m *Memory) FileUsage(_ context.Context, tenant string) (int, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var bytes int64
	for _, n := range m.fileBytes[tenant] {
		bytes += n
	}
	return len(m.fileBytes[tenant]), bytes, nil
}

// ExpiredFiles implements batch.Store: up to limit files past their expiry, soonest
// first, with their id and tenant only.
func (m *Memory) ExpiredFiles(_ context.Context, limit int) ([]*state.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	var members []string
	for k, exp := range m.fileExpiries {
		if !exp.After(now) {
			members = append(members, k)
		}
	}
	slices.SortFunc(members, func(a, b string) int {
		if c := m.fileExpiries[a].Compare(m.fileExpiries[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if limit > 0 && len(members) > limit {
		members = members[:limit]
	}
	out := make([]*state.File, 0, len(members))
	for _, k := range members {
		id, tenant, _ := strings.Cut(k, "/")
		out = append(out, &state.File{ID: id, Tenant: tenant})
	}
	return out, nil
}

// TenantFiles implements batch.Store: newest first unless asc, after the cursor.
func (m *Memory) TenantFiles(_ context.Context, tenant, after string, asc bool) iter.Seq2[string, error] {
	return m.index(m.tenantFiles, tenant, after, asc)
}

// AcquireLease implements batch.Store: a tenant's lease of kind is taken while fewer
// than limit live ones are held (limit 0: always, nothing kept); taking a lease held
// already renews it.
func (m *Memory) AcquireLease(_ context.Context, kind, tenant, id string, limit int, ttl time.Duration) (bool, error) {
	if limit <= 0 {
		return true, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	set := sub(m.tenantLeases, kind+"/"+tenant)
	if len(set) >= limit {
		maps.DeleteFunc(set, func(_ string, until time.Time) bool { return !until.After(now) })
		if _, held := set[id]; !held && len(set) >= limit {
			return false, nil
		}
	}
	set[id] = now.Add(ttl)
	return true, nil
}

// ReleaseLease implements batch.Store.
func (m *Memory) ReleaseLease(_ context.Context, kind, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.tenantLeases[kind+"/"+tenant], id)
	return nil
}

// LeasesHeld counts tenant's live leases of kind (state.Store.LeasesHeld).
func (m *Memory) LeasesHeld(_ context.Context, kind, tenant string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, n := time.Now(), 0
	for _, until := range m.tenantLeases[kind+"/"+tenant] {
		if !until.Before(now) {
			n++
		}
	}
	return n, nil
}

// quota is a tenant's storage ledger: each record's bytes and expiry.
type quota struct {
	used    int64
	bytes   map[string]int64
	expires map[string]time.Time
}

// quotaOf returns tenant's ledger with the records past their expiry given back. m.mu
// is held.
func (m *Memory) quotaOf(tenant string) *quota {
	q, ok := m.quotas[tenant]
	if !ok {
		q = &quota{bytes: map[string]int64{}, expires: map[string]time.Time{}}
		m.quotas[tenant] = q
	}
	now := time.Now()
	for r, exp := range q.expires {
		if !exp.After(now) {
			q.used -= q.bytes[r]
			delete(q.bytes, r)
			delete(q.expires, r)
		}
	}
	return q
}

// first is the earliest expiry of q's records (zero: none).
func (q *quota) first() time.Time {
	var f time.Time
	for _, exp := range q.expires {
		if f.IsZero() || exp.Before(f) {
			f = exp
		}
	}
	return f
}

// ChargeRecord implements batch.Store: a record is charged at its new size and expiry;
// a growth past limit (0: none) is refused unless force, a shrink always fits.
func (m *Memory) ChargeRecord(_ context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, state.Storage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.quotaOf(tenant)
	st := state.Storage{Limit: max(limit, 0)}
	d := bytes - q.bytes[record]
	if !force && d > 0 && limit > 0 && q.used+d > limit {
		st.Used, st.FirstExpiry = q.used, q.first()
		return false, st, nil
	}
	q.used += d
	q.bytes[record] = bytes
	q.expires[record] = msTime(expires)
	st.Used, st.FirstExpiry = q.used, q.first()
	return true, st, nil
}

// ReleaseRecord gives a deleted record's bytes back (state.Store.ReleaseRecord).
func (m *Memory) ReleaseRecord(_ context.Context, tenant, record string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.quotaOf(tenant)
	q.used -= q.bytes[record]
	delete(q.bytes, record)
	delete(q.expires, record)
	return nil
}

// StorageOf reads tenant's storage use (state.Store.StorageOf).
func (m *Memory) StorageOf(_ context.Context, tenant string) (state.Storage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.quotaOf(tenant)
	return state.Storage{Used: q.used, Records: int64(len(q.expires))}, nil
}
