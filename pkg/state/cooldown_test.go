package state_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/internal/testkit/testenv"
	"github.com/searchfleet/searchfleet/pkg/engines"
	"github.com/searchfleet/searchfleet/pkg/provider"
	"github.com/searchfleet/searchfleet/pkg/state"
)

func TestKeyCooldowns(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	fps := []string{engines.Fingerprint("a"), engines.Fingerprint("b")}

	rests, err := s.Searches.Resting(ctx, "brave", fps)
	if err != nil || len(rests) != 2 || rests[0].Left != 0 || rests[1].Left != 0 {
		t.Fatalf("fresh keys: %+v, %v; want both usable", rests, err)
	}
	// Of concurrent callers cooling the same key, exactly one is first.
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if first, err := s.Searches.CoolDown(ctx, "brave", fps[0], engines.RateLimited, time.Minute); err != nil {
				t.Error(err)
			} else if first {
				firsts.Add(1)
			}
		}()
	}
	wg.Wait()
	if firsts.Load() != 1 {
		t.Fatalf("%d callers saw the key usable before; want exactly 1", firsts.Load())
	}
	// A shorter rest never shortens a longer one; a longer one extends it.
	if first, _ := s.Searches.CoolDown(ctx, "brave", fps[0], engines.RateLimited, time.Second); first {
		t.Fatal("a resting key was reported usable")
	}
	if _, err := s.Searches.CoolDown(ctx, "brave", fps[0], engines.Auth, time.Hour); err != nil {
		t.Fatal(err)
	}
	rests, _ = s.Searches.Resting(ctx, "brave", fps)
	if rests[0].Left <= time.Minute || rests[0].Reason != engines.Auth {
		t.Fatalf("rest = %+v, want about an hour for auth", rests[0])
	}
	if rests[1].Left != 0 {
		t.Fatalf("the other key rests too: %+v", rests[1])
	}
	// Other engines' keys of the same fingerprint are separate.
	if other, _ := s.Searches.Resting(ctx, "tavily", fps[:1]); other[0].Left != 0 {
		t.Fatalf("a rest leaked to another engine: %+v", other[0])
	}
	// A short rest ends by itself.
	if _, err := s.Searches.CoolDown(ctx, "brave", fps[1], engines.RateLimited, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rests, _ = s.Searches.Resting(ctx, "brave", fps)
		if rests[1].Left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a 50 ms rest did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The main models' key cooldowns work as the engines' but apart from them: a provider
// key resting never makes the engine of the same name and fingerprint rest, nor back.
func TestModelKeyCooldownsApartFromEngines(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	m := s.Searches.ModelKeyCooldowns()
	ctx := context.Background()
	fps := []string{provider.Fingerprint("a"), provider.Fingerprint("b")}
	first, err := m.CoolDown(ctx, "gemini", fps[0], provider.Quota, time.Minute)
	if err != nil || !first {
		t.Fatalf("first rest: %v, %v", first, err)
	}
	if again, _ := m.CoolDown(ctx, "gemini", fps[0], provider.RateLimited, time.Second); again {
		t.Fatal("a resting key was reported usable")
	}
	rests, err := m.Resting(ctx, "gemini", fps)
	if err != nil || rests[0].Reason != provider.Quota || rests[0].Left <= 30*time.Second || rests[1].Left != 0 {
		t.Fatalf("rests = %+v, %v; want key a resting a minute for quota", rests, err)
	}
	if er, _ := s.Searches.Resting(ctx, "gemini", fps[:1]); er[0].Left != 0 {
		t.Fatalf("the provider's rest leaked to the engine of its name: %+v", er[0])
	}
	s.Searches.CoolDown(ctx, "gemini", fps[1], engines.Auth, time.Minute)
	if rests, _ = m.Resting(ctx, "gemini", fps); rests[1].Left != 0 {
		t.Fatalf("the engine's rest leaked to the provider of its name: %+v", rests[1])
	}
}

// BenchmarkResting is the Redis round trip every search of an engine with shared
// cooldowns pays before its request (two keys).
func BenchmarkResting(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	s := state.New(rdb, prefix, time.Hour)
	ctx := context.Background()
	fps := []string{engines.Fingerprint("a"), engines.Fingerprint("b")}
	s.Searches.CoolDown(ctx, "brave", fps[0], engines.RateLimited, time.Minute)
	for b.Loop() {
		if _, err := s.Searches.Resting(ctx, "brave", fps); err != nil {
			b.Fatal(err)
		}
	}
}
