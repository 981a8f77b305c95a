package ingress

import (
	"net/http"
)

// mcpRoute serves the Model Context Protocol endpoint (pkg/ingress/mcp) to
// callers whose API key is a tenant's, as every other route does; a missing or unknown
// key is 401 with a JSON-RPC error body, which MCP clients show as it is. The request
// rate is not taken here: each tool call is an API request made in process with the
// caller's key, and that request takes it (with the tenant's other limits, budget and
// quotas), so an MCP client's own protocol traffic (initialize, tools/list) does not
// use up the tenant's rate.
func (s *Server) mcpRoute() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Tenants != nil {
			if _, ok := s.Tenants.of(r); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="searchfleet"`)
				writeJSON(w, http.StatusUnauthorized, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
					"code":    -32001,
					"message": "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.",
				}})
				return
			}
		}
		authenticated(r)
		s.mcp.ServeHTTP(w, r)
	})
}
