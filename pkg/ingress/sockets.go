package ingress

import (
	"fmt"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// leaseSockets is the lease kind of a tenant's open Responses WebSockets.
const leaseSockets = "ws"

// socketCore is the ingress as the Responses WebSockets see it (responsesws.Core).
type socketCore struct{ s *Server }

// Admit takes a lease on one of the tenant's Streams for the socket's lifetime.
func (c socketCore) Admit(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	s, tenant := c.s, tenantOf(r)
	limit := s.Limits.Of(tenant).Streams
	if limit <= 0 {
		return func() {}, true
	}
	id := state.NewID("lease_")
	took, err := s.Store.Leases.AcquireLease(r.Context(), leaseSockets, tenant, id, limit, leaseTTL)
	if err != nil {
		s.limitsUnavailable(w, r, wire.Responses, err)
		return nil, false
	}
	if !took {
		s.refuse(w, wire.Responses, tenant, "websockets", s.pace.slotFree(tenant, limit, s.JobTimeout),
			fmt.Sprintf("Too many open WebSockets: at most %d at once; close one, or use POST /v1/responses.", limit))
		return nil, false
	}
	return s.keepLease(r.Context(), leaseSockets, tenant, id, limit), true
}

// Create runs a socket's response.create as a streamed POST /v1/responses.
func (c socketCore) Create(w http.ResponseWriter, r *http.Request) {
	if s := c.s; s.allowRate(w, r, wire.Responses, tenantOf(r)) {
		s.budgeted(wire.Responses, s.protocolRequest(wire.Responses, "resp_"))(w, r)
	}
}
