package state

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A tenant's storage quota counts the bytes of every record the fleet keeps for it
// until the record expires (job records: request, answer, trace, chain and recorded
// searches). The ledger is two keys in the tenant's hash slot: a hash of "used" and
// each record's bytes ("b:<record>"), and a sorted set of the records by expiry. A
// record is charged before it is written (or, when it grows, as it grows) in one
// script that checks the limit and counts it; it is given back when deleted
// (ReleaseRecord) or, once past its expiry, by the next quota call of the tenant,
// which sweeps what lapsed (at most 128 records a call; every call sweeps, so the
// ledger keeps up with any rate of writes). Records are named, not located: the same
// ledger counts a record whether Redis or another store (a JetStream KV bucket with
// the same TTL) holds its bytes.

// RecordAllowance is what a new job is charged beyond its request until it ends and
// its real size is known: room for its answer, trace and chain (64 KiB).
const RecordAllowance = 64 << 10

// quotaSweep gives back a tenant's records past their expiry. KEYS[1] ledger,
// KEYS[2] expiries. Returns now (ms).
const quotaSweep = `
local head -- the earliest expiry, as sweep left it (nil: no records)
local function sweep()
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if f[2] and tonumber(f[2]) <= now then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 128)) do
      local b = redis.call('HGET', KEYS[1], 'b:' .. m)
      if b then
        redis.call('HINCRBY', KEYS[1], 'used', -tonumber(b))
        redis.call('HDEL', KEYS[1], 'b:' .. m)
      end
      redis.call('ZREM', KEYS[2], m)
    end
    f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  end
  if f[2] then head = math.floor(tonumber(f[2])) end
  return now
end
-- keep makes both keys outlive the record expiring at exp (ms): they are pushed a
-- day past it when they would not, so most charges pay one PTTL for it.
local function keep(now, exp)
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 or now + left < exp + 60000 then
    redis.call('PEXPIREAT', KEYS[1], exp + 86400000)
    redis.call('PEXPIREAT', KEYS[2], exp + 86400000)
  end
end
local function first()
  return head or 0
end
`

// chargeRecord sets a record's bytes in its tenant's ledger. KEYS as quotaSweep;
// ARGV[1] record, ARGV[2] bytes, ARGV[3] expiry (ms), ARGV[4] limit (-1: none),
// ARGV[5] "1" to charge whatever the limit (the bytes are written already). A record
// that grows is refused when the growth does not fit; one that shrinks always fits.
// Returns {1 charged | 0 refused, used bytes, first expiry ms}.
var chargeRecord = redis.NewScript(quotaSweep + `
local now = sweep()
local f = 'b:' .. ARGV[1]
local v = redis.call('HMGET', KEYS[1], f, 'used')
local old, used = tonumber(v[1] or '0'), tonumber(v[2] or '0')
local d = tonumber(ARGV[2]) - old
local limit = tonumber(ARGV[4])
if ARGV[5] ~= '1' and d > 0 and limit >= 0 and used + d > limit then return {0, used, first()} end
if d ~= 0 then used = redis.call('HINCRBY', KEYS[1], 'used', d) end
redis.call('HSET', KEYS[1], f, ARGV[2])
local exp = tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], exp, ARGV[1])
-- The earliest expiry moves only if this record is (or was) the earliest.
if not head or exp < head or v[1] then
  local h = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  head = h[2] and math.floor(tonumber(h[2])) or nil
end
keep(now, exp)
return {1, used, first()}
`)

// releaseRecord gives a deleted record's bytes back. KEYS as quotaSweep; ARGV[1]
// record. Returns the used bytes.
var releaseRecord = redis.NewScript(quotaSweep + `
sweep()
local f = 'b:' .. ARGV[1]
local b = redis.call('HGET', KEYS[1], f)
if b then
  redis.call('HINCRBY', KEYS[1], 'used', -tonumber(b))
  redis.call('HDEL', KEYS[1], f)
end
redis.call('ZREM', KEYS[2], ARGV[1])
return tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
`)

// storageUsed sweeps and reads a tenant's used bytes and its records' count.
var storageUsed = redis.NewScript(quotaSweep + `
sweep()
return {tonumber(redis.call('HGET', KEYS[1], 'used') or '0'), redis.call('ZCARD', KEYS[2])}
`)

// Storage is a tenant's storage quota as it stands.
type Storage struct {
	// Used is the bytes charged; Records how many records hold them.
	Used    int64
	Records int64
	// Limit is the quota (0: none).
	Limit int64
	// FirstExpiry is when the tenant's oldest record expires (zero: none), which is
	// the soonest bytes come back on their own.
	FirstExpiry time.Time
}

// ChargeRecord charges record, bytes that tenant keeps until expires, against its
// storage quota of limit bytes (0: no limit, the bytes are counted all the same).
// Charging a record again moves it to its new size and expiry. It reports whether the
// record was charged: a growth that does not fit is refused (nothing changes), unless
// force is set (the bytes are written already: they are counted, and the tenant's next
// record is refused). The check and the count are one atomic step across processes.
func (s *Ledger) ChargeRecord(ctx context.Context, tenant, record string, bytes int64, expires time.Time, limit int64, force bool) (bool, Storage, error) {
	lim := int64(-1)
	if limit > 0 {
		lim = limit
	}
	f := "0"
	if force {
		f = "1"
	}
	v, err := chargeRecord.Run(ctx, s.r, []string{s.K.QuotaBytes(tenant), s.K.QuotaExpiries(tenant)}, record, bytes, expires.UnixMilli(), lim, f).Int64Slice()
	if err != nil || len(v) != 3 {
		return false, Storage{}, fmt.Errorf("state: charging storage: %w", err)
	}
	st := Storage{Used: v[1], Limit: max(limit, 0)}
	if v[2] > 0 {
		st.FirstExpiry = time.UnixMilli(v[2]).UTC()
	}
	return v[0] == 1, st, nil
}

// ReleaseRecord gives a deleted record's bytes back to its tenant's quota (a record
// not charged is no error).
func (s *Ledger) ReleaseRecord(ctx context.Context, tenant, record string) error {
	if err := releaseRecord.Run(ctx, s.r, []string{s.K.QuotaBytes(tenant), s.K.QuotaExpiries(tenant)}, record).Err(); err != nil {
		return fmt.Errorf("state: releasing storage: %w", err)
	}
	return nil
}

// StorageOf reads tenant's storage use (records past their expiry given back first).
func (s *Ledger) StorageOf(ctx context.Context, tenant string) (Storage, error) {
	v, err := storageUsed.Run(ctx, s.r, []string{s.K.QuotaBytes(tenant), s.K.QuotaExpiries(tenant)}).Int64Slice()
	if err != nil || len(v) != 2 {
		return Storage{}, fmt.Errorf("state: reading storage: %w", err)
	}
	return Storage{Used: v[0], Records: v[1]}, nil
}

// jobFootprint sums the bytes (field names and values) of a job's hashes, and the
// archived bytes the job record notes (field "cold"). KEYS are the hashes, the job
// record first, the summary key of a job an earlier release archived last (an
// archived job's summary is a part of its record now). The calls' outcomes and fallback state in the
// job's hash (calls.go) are not counted: an outcome repeats a result the chain keeps,
// and neither is kept past the job.
var jobFootprint = redis.NewScript(`
-- An archived job (its record notes the archived bytes in 'cold') keeps only its
-- short record, with its summary, in Redis (an earlier release kept the summary in
-- a key of its own): 3 commands instead of a walk of every key.
local cold = redis.call('HGET', KEYS[1], 'cold')
if cold then
  local n = tonumber(cold)
  for _, x in ipairs(redis.call('HGETALL', KEYS[1])) do n = n + #x end
  return n + redis.call('STRLEN', KEYS[#KEYS])
end
local n = 0
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t == 'hash' then
    for _, f in ipairs(redis.call('HKEYS', k)) do
      if k ~= KEYS[1] or not (string.find(f, '^o:') or string.find(f, '^fe:') or string.find(f, '^ft:') or string.find(f, '^i:')) then
        n = n + #f + redis.call('HSTRLEN', k, f)
      end
    end
  elseif t == 'string' then
    n = n + redis.call('STRLEN', k)
  end
end
return n
`)

// JobFootprint is what a job keeps for the retention period, in bytes: its record
// (request, answer, trace, usage), its chain (every hop's turn and results) and its
// recorded searches, and its stored Responses object if it has one — wherever they
// are: what Redis holds plus the bytes of its archived record (ArchiveJob). The
// tenant's quota is charged this when the job ends.
func (s *Ledger) JobFootprint(ctx context.Context, id string) (int64, error) {
	keys := []string{s.K.Job(id), s.K.StoredResponse(id), s.K.JobSummary(id)}
	n, err := jobFootprint.Run(ctx, s.r, keys).Int64()
	if err != nil {
		return 0, fmt.Errorf("state: measuring job %s: %w", id, err)
	}
	return n, nil
}

// DropSearchResults deletes a job's stored search outcomes and fallback state (the
// calls' fields of its hash, calls.go) once the job has ended: each outcome repeats a
// result the chain keeps, and only a redelivered search of a running job reads it (a
// search of an ended job is not made).
func (s *Ledger) DropSearchResults(ctx context.Context, id string) error {
	if s.archive != nil {
		return nil // ArchiveJob, the first finish hook, drops them with the chain
	}
	fields, err := s.r.HKeys(ctx, s.K.Job(id)).Result()
	if err != nil {
		return fmt.Errorf("state: reading job %s's fields: %w", id, err)
	}
	var drop []string
	for _, f := range fields {
		if kindOf(f) == callStateField {
			drop = append(drop, f)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if err := s.r.HDel(ctx, s.K.Job(id), drop...).Err(); err != nil {
		return fmt.Errorf("state: dropping job %s's search results: %w", id, err)
	}
	return nil
}
