package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Records is the durable store of ended jobs' records: a JetStream key-value bucket
// (BucketRecords) on file storage, replicated as the JOBS stream is, S2-compressed,
// one revision per key, whose entries expire after the retention period (the bucket's
// max age). A record is written once: the first Put of a key stands, a later one (a
// redelivered finish) changes nothing.
//
// A value that fits in one message (the server's max payload less a margin) is one
// entry, "=" + value. A larger one is cut into chunks stored under
// "<key>.<digest>.<n>" and then named by the key's entry, ">" + "<digest> <chunks>
// <bytes>": a reader that finds the key finds every chunk, and chunks of two attempts
// never mix (the digest is of the whole value).
type Records struct {
	kv       jetstream.KeyValue
	chunk    int
	maxBytes int64

	// full caches Full's answer for a second.
	fullMu sync.Mutex
	fullAt time.Time
	full   bool

	// For a reader (ReadRecords): the bucket, bound on first use.
	b  *Bus
	mu sync.Mutex
}

// ErrRecordsFull matches (errors.Is) a Put refused because the bucket holds its
// MaxBytes: the record stays where it is (Redis) until it expires or space frees.
var ErrRecordsFull = errors.New("the records bucket is full")

// OpenRecords creates (or updates) the records bucket of b's namespace, keeping
// entries for retention, at most maxBytes of them (0: no bound; a full bucket refuses
// new records with ErrRecordsFull and never drops old ones), and returns it. Every
// process that reads or writes records opens it at start; it is idempotent. The bound
// keeps a full bucket from taking the JetStream store the JOBS and EVENTS streams
// need.
func OpenRecords(ctx context.Context, b *Bus, retention time.Duration, maxBytes ...int64) (*Records, error) {
	cfg := jetstream.KeyValueConfig{Bucket: b.Name(BucketRecords), History: 1, TTL: retention,
		Description: "records of ended jobs: request, answer, trace, hop turns, recorded searches, stored responses",
		Storage:     jetstream.FileStorage, Replicas: b.jobsReplicas(ctx), Compression: true}
	if len(maxBytes) > 0 && maxBytes[0] > 0 {
		cfg.MaxBytes = maxBytes[0]
	}
	// Processes start together: riding out a cluster that is slow to create an R3
	// bucket (or failing over) as streams and consumers do, rather than exiting.
	var kv jetstream.KeyValue
	err := retryTransient(ctx, func(ctx context.Context) (err error) {
		kv, err = b.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nats: records bucket %s: %w", cfg.Bucket, err)
	}
	// Room for the entry's subject and headers within one message.
	chunk := int(b.nc.MaxPayload()) - 8<<10
	return &Records{kv: kv, chunk: max(chunk, 64<<10), maxBytes: cfg.MaxBytes}, nil
}

// Full reports whether the bucket (opened with a bound) has no room left for a large
// record. The answer is kept for a second: the ingress asks it per request.
func (r *Records) Full(ctx context.Context) bool {
	if r.maxBytes <= 0 || r.kv == nil {
		return false
	}
	r.fullMu.Lock()
	defer r.fullMu.Unlock()
	if time.Since(r.fullAt) < time.Second {
		return r.full
	}
	st, err := r.kv.Status(ctx)
	if err != nil {
		return r.full // as last seen
	}
	// No room for a large record: a chunk, or a fifth of a small bucket.
	margin := min(int64(r.chunk), r.maxBytes/5)
	r.full, r.fullAt = int64(st.Bytes())+margin > r.maxBytes, time.Now()
	return r.full
}

// MaxBytes is the bucket's bound (0: none).
func (r *Records) MaxBytes() int64 { return r.maxBytes }

// ReadRecords returns the records bucket of b's namespace as it is, for a process
// that reads records without owning the bucket's settings (a test, a tool): it binds
// to the bucket on first use, and until the bucket exists, Get finds nothing.
func ReadRecords(b *Bus) *Records { return &Records{b: b} }

// bucket returns the bound bucket; nil while a reader's bucket does not exist.
func (r *Records) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	if r.b == nil {
		return r.kv, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	kv, err := r.b.js.KeyValue(ctx, r.b.Name(BucketRecords))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nats: records bucket: %w", err)
	}
	r.kv, r.chunk = kv, max(int(r.b.nc.MaxPayload())-8<<10, 64<<10)
	return kv, nil
}

// Put stores value under key unless key holds a record already (the first write
// stands). It is safe to repeat and to race.
func (r *Records) Put(ctx context.Context, key string, value []byte) error {
	kv, err := r.bucket(ctx)
	if err != nil {
		return err
	}
	if kv == nil {
		return fmt.Errorf("nats: storing record %s: the records bucket does not exist", key)
	}
	if len(value)+1 <= r.chunk {
		_, err := r.kv.Create(ctx, key, append([]byte{'='}, value...))
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("nats: storing record %s: %w", key, full(err))
		}
		return nil
	}
	if _, err := r.kv.Get(ctx, key); err == nil {
		return nil // stored already: its chunks need not be written again
	}
	sum := sha256.Sum256(value)
	digest := hex.EncodeToString(sum[:8])
	n := 0
	for off := 0; off < len(value); off += r.chunk {
		part := value[off:min(off+r.chunk, len(value))]
		if _, err := r.kv.Put(ctx, chunkKey(key, digest, n), part); err != nil {
			return fmt.Errorf("nats: storing record %s: %w", key, full(err))
		}
		n++
	}
	head := fmt.Sprintf(">%s %d %d", digest, n, len(value))
	if _, err := r.kv.Create(ctx, key, []byte(head)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("nats: storing record %s: %w", key, full(err))
	}
	return nil
}

// full is err, as ErrRecordsFull when the server refused the write for the bucket's
// MaxBytes.
func full(err error) error {
	if strings.Contains(err.Error(), "maximum bytes exceeded") {
		return fmt.Errorf("%w (%w)", ErrRecordsFull, err)
	}
	return err
}

func chunkKey(key, digest string, n int) string { return key + "." + digest + "." + strconv.Itoa(n) }

// Get reads the record under key: nil (and no error) when there is none, or it
// expired.
func (r *Records) Get(ctx context.Context, key string) ([]byte, error) {
	kv, err := r.bucket(ctx)
	if kv == nil {
		return nil, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nats: reading record %s: %w", key, err)
	}
	v := e.Value()
	if len(v) == 0 {
		return nil, fmt.Errorf("nats: record %s is empty", key)
	}
	switch v[0] {
	case '=':
		return v[1:], nil
	case '>':
		var digest string
		var n, size int
		if _, err := fmt.Sscanf(string(v[1:]), "%s %d %d", &digest, &n, &size); err != nil {
			return nil, fmt.Errorf("nats: record %s: unreadable head %q", key, v)
		}
		out := bytes.NewBuffer(make([]byte, 0, size))
		for i := range n {
			c, err := r.kv.Get(ctx, chunkKey(key, digest, i))
			if err != nil {
				return nil, fmt.Errorf("nats: reading record %s, chunk %d of %d: %w", key, i+1, n, err)
			}
			out.Write(c.Value())
		}
		sum := sha256.Sum256(out.Bytes())
		if out.Len() != size || !strings.EqualFold(hex.EncodeToString(sum[:8]), digest) {
			return nil, fmt.Errorf("nats: record %s: %d bytes do not match its head", key, out.Len())
		}
		return out.Bytes(), nil
	}
	return nil, fmt.Errorf("nats: record %s: unknown form %q", key, v[0])
}
