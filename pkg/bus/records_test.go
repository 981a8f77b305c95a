package bus_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/bus/bustest"
)

// Records keep the first value of a key, under racing writers too; a value larger
// than a message is chunked and read back whole; a reader bound before the bucket
// exists finds nothing, then finds what is written.
func TestRecordsFirstWriteStandsAndChunks(t *testing.T) {
	t.Parallel()
	b, url := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader := bus.ReadRecords(bustest.Connect(t, url))
	if v, err := reader.Get(ctx, "job_x"); v != nil || err != nil {
		t.Fatalf("before the bucket exists: %q, %v", v, err)
	}
	r, err := bus.OpenRecords(ctx, b, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Put(ctx, "job_x", []byte{'{', byte('a' + i), '}'}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	first, err := r.Get(ctx, "job_x")
	if err != nil || len(first) != 3 {
		t.Fatalf("after racing puts: %q, %v", first, err)
	}
	if err := r.Put(ctx, "job_x", []byte("{z}")); err != nil {
		t.Fatal(err)
	}
	if v, _ := reader.Get(ctx, "job_x"); !bytes.Equal(v, first) {
		t.Errorf("a later put changed the record: %q, want %q", v, first)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/16+3) // 5 MiB: chunks of the 1 MiB payload
	if err := r.Put(ctx, "job_big", big); err != nil {
		t.Fatal(err)
	}
	if err := r.Put(ctx, "job_big", append([]byte("other"), big...)); err != nil {
		t.Fatal(err)
	}
	if v, err := reader.Get(ctx, "job_big"); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("chunked record: %d bytes, %v; want %d", len(v), err, len(big))
	}
	if v, err := r.Get(ctx, "job_none"); v != nil || err != nil {
		t.Errorf("no record: %q, %v", v, err)
	}
}
