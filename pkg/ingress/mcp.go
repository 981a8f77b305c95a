package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// mcpRoute serves the Model Context Protocol endpoint (pkg/ingress/mcp) to callers
// whose API key is a tenant's, as every other route does; a missing or unknown key is
// 401 with a JSON-RPC error body, which MCP clients show as it is.
//
// A POST carries one JSON-RPC message: a batch (a JSON array, which protocol versions
// before 2025-06-18 allowed) is refused with 400 under every version, so a request
// cannot make the endpoint answer and buffer thousands of entries. Each HTTP request
// takes one request from the tenant's rate (answered 429 with Retry-After and a
// JSON-RPC error), except tools/call: each tool call is an API request made in process
// with the caller's key, and that request takes it (with the tenant's other limits,
// budget and quotas).
func (s *Server) mcpRoute() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := tenantOf(r)
		if s.Tenants != nil {
			t, ok := s.Tenants.of(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="searchfleet"`)
				mcpError(w, http.StatusUnauthorized, nil, -32001, "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.")
				return
			}
			tenant = t
		}
		authenticated(r)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method == http.MethodPost {
			body, e := s.boundedBody(w, r)
			switch {
			case e != nil && e.Status == http.StatusRequestEntityTooLarge:
				mcpError(w, e.Status, nil, -32600, fmt.Sprintf("The request body exceeds the limit of %d bytes.", s.MaxBody))
				return
			case e != nil:
				mcpError(w, http.StatusBadRequest, nil, -32700, e.Message)
				return
			}
			if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
				mcpError(w, http.StatusBadRequest, nil, -32600, "JSON-RPC batches are not accepted: send one JSON-RPC message per HTTP request.")
				return
			}
			json.Unmarshal(body, &msg) // the SDK answers a malformed message
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if msg.Method != "tools/call" {
			wait, words, err := s.takeRate(r.Context(), tenant)
			if err != nil {
				s.logFailure(r.Context(), "api: checking a tenant's limits", "err", err)
				w.Header().Set("Retry-After", "1")
				mcpError(w, http.StatusServiceUnavailable, msg.ID, -32000, "The fleet is unavailable; try again.")
				return
			}
			if wait > 0 {
				s.rejected(tenant, "rate")
				setRetryAfter(w, wait)
				mcpError(w, http.StatusTooManyRequests, msg.ID, -32000, words)
				return
			}
		}
		s.mcp.ServeHTTP(w, r)
	})
}

// mcpError answers with a JSON-RPC error (id nil: null).
func mcpError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}
