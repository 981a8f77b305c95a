package ingress_test

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A refused job slot's Retry-After follows the tenant's pace: with its jobs lasting
// about 40 s and two slots, one frees about every 20 s, not every second.
func TestSlotRetryAfterEstimated(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{QueuedJobs: 2})
	now := time.Now()
	for range 3 {
		l.s.JobFinished(t.Context(), &state.Job{ID: "job_paced", Tenant: "a", Created: now.Add(-40 * time.Second), Finished: now})
	}
	for i := range 2 {
		if rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody); rec.Code != 202 {
			t.Fatalf("job %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody)
	after, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != 429 || after != 20 {
		t.Errorf("a job past the cap: %d, Retry-After %q, want 429 and 20", rec.Code, rec.Header().Get("Retry-After"))
	}
}

// The Authorization scheme is case-insensitive (RFC 9110 11.1): bearer, BEARER and
// Bearer authenticate; another scheme does not.
func TestBearerSchemeAnyCase(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{})
	for _, h := range []string{"Bearer ka", "bearer ka", "BEARER ka", "bEaReR   ka"} {
		req := httptest.NewRequest("GET", "/v1/models", nil)
		req.Header.Set("Authorization", h)
		rec := httptest.NewRecorder()
		l.h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("Authorization: %s → %d %s", h, rec.Code, rec.Body)
		}
	}
	for _, h := range []string{"Basic ka", "ka", "Bearer", "Bearerka"} {
		req := httptest.NewRequest("GET", "/v1/models", nil)
		req.Header.Set("Authorization", h)
		rec := httptest.NewRecorder()
		l.h.ServeHTTP(rec, req)
		if rec.Code != 401 {
			t.Errorf("Authorization: %s → %d, want 401", h, rec.Code)
		}
	}
}

// A refused job slot's Retry-After is no sooner than the tenant's jobs have been
// ending: many slots held by one-minute jobs that end 30 s apart (they wait for their
// share of the workers) free one about every 30 s, not every minute / slots.
func TestSlotRetryAfterFollowsEnds(t *testing.T) {
	t.Parallel()
	l := newLimited(t, config.Limits{}, config.Limits{QueuedJobs: 2})
	start := time.Now().Add(-5 * time.Minute)
	for i := range 4 {
		end := start.Add(time.Duration(i) * 30 * time.Second)
		l.s.JobFinished(t.Context(), &state.Job{ID: "job_paced", Tenant: "a", Created: end.Add(-time.Minute), Finished: end})
	}
	for i := range 2 {
		if rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody); rec.Code != 202 {
			t.Fatalf("job %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := l.do(t.Context(), "ka", "POST", "/v1/jobs", chatBody)
	after, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != 429 || after != 30 {
		t.Errorf("a job past the cap: %d, Retry-After %q, want 429 and 30", rec.Code, rec.Header().Get("Retry-After"))
	}
}
