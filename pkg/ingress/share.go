package ingress

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// HeaderShare, "in-flight" on POST /v1/jobs, asks for the outcome of an identical job
// of the tenant's that is still running (the same chat request, callback and
// metadata aside) instead of a new one: the answer is that job (202, its id), with
// HeaderShared set, as a retry under an Idempotency-Key is answered with its job.
// A job that has ended is not shared: the request makes a new job. A request with
// an Idempotency-Key or a callback does not share (the key, or the callback's own
// signing secret, names one job of its own).
const (
	HeaderShare  = "X-Searchfleet-Share"
	HeaderShared = "X-Searchfleet-Shared"
)

// shareKey is the key an identical request's job is shared under (chatBody is the
// request as the job runs it): the tenant's Idempotency-Keys hold it, under a name
// no client's key can have (a header value has no newline).
func shareKey(r *http.Request, chatBody []byte) (key, hash string, ok bool) {
	if r.Header.Get(HeaderShare) != "in-flight" {
		return "", "", false
	}
	hash = requestHash(chatBody)
	return "share\n" + hash, hash, true
}

// requestHash is the hash a request body is known by under a key: the hex of its
// SHA-256's first 16 bytes.
func requestHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:16])
}

// claimShared claims key (shareKey's) for jobID, as ClaimIdempotency does, but only
// while the job it names runs: a key whose job has ended (or is gone) is taken over.
func (s *Server) claimShared(ctx context.Context, tenant, key, jobID, hash string) (won bool, existing string, err error) {
	for range 2 {
		won, existing, existingHash, err := s.Store.Jobs.ClaimIdempotency(ctx, tenant, key, jobID, hash, s.JobTimeout)
		if err != nil || won {
			return won, "", err
		}
		st, err := s.Store.Jobs.JobStatus(ctx, existing)
		if err == nil && !st.Terminal() {
			return false, existing, nil
		}
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			return false, "", err
		}
		if err := s.Store.Jobs.ReleaseIdempotency(ctx, tenant, key, existing, existingHash); err != nil {
			return false, "", err
		}
	}
	return true, "", nil // taken over twice by racing requests: this one runs its own
}
