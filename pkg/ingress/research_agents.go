package ingress

import (
	"fmt"
	"net/http"

	"github.com/searchfleet/searchfleet/internal/redact"
)

// The research agents (pkg/research/agent): GET /v1/research/agents lists the
// configured agents a run may name ({"agent": "<name>"}); POST
// /v1/research/agents/{name}/webhook takes the provider's webhooks (OpenAI's
// response.*, Gemini's interaction.*, Parallel's task_run.status), verified by their
// Standard Webhooks signature, not by an API key.

func (s *Server) listResearchAgents(w http.ResponseWriter, r *http.Request) {
	if s.researchOff(w) {
		return
	}
	data := make([]any, 0, len(s.Research.Agents))
	for _, a := range s.Research.Agents {
		v := map[string]any{"object": "research.agent", "name": a.Name, "kind": a.Kind, "price_usd": a.PriceUSD}
		if len(a.Models) > 0 {
			v["models"] = a.Models // the Responses model names that run it
		}
		data = append(data, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) researchAgentWebhook(w http.ResponseWriter, r *http.Request) {
	if s.Research == nil {
		http.NotFound(w, r)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	verified, err := s.Research.AgentWebhook(r.Context(), name, r.Header, body)
	switch {
	case !verified:
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "", fmt.Sprintf("The webhook for %q does not verify.", redact.Clip(name, 64)))
	case err != nil:
		s.logFailure(r.Context(), "api: a research agent's webhook", "agent", name, "err", err)
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "", "The webhook could not be taken; deliver it again.")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
