package ingress

import (
	"fmt"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/llm/responses"
)

// leaseSockets is the lease kind of a tenant's open Responses WebSockets.
const leaseSockets = "ws"

// admitSocket takes a lease on one of the tenant's Streams for a Responses
// WebSocket's lifetime (responsesws.Options.Admit).
func (s *Server) admitSocket(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	tenant := tenantOf(r)
	limit := s.Limits.Of(tenant).Streams
	return s.takeSlot(w, r, responses.Client, tenant, leaseSockets, limit, "websockets",
		fmt.Sprintf("Too many open WebSockets: at most %d at once; close one, or use POST /v1/responses.", limit))
}

// socketCreate runs a socket's response.create as a streamed POST /v1/responses
// (responsesws.Options.Create).
func (s *Server) socketCreate(w http.ResponseWriter, r *http.Request) {
	if s.allowRate(w, r, responses.Client, tenantOf(r)) {
		s.budgeted(responses.Client, s.protocolRequest(responses.Client, "resp_"))(w, r)
	}
}
