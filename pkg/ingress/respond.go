package ingress

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/pkg/jobs"
	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// writeError answers with an OpenAI-shaped error: {"error": {...}}.
func writeError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	b := jobs.ErrorBody{Message: msg, Type: typ}
	if param != "" {
		b.Param = &param
	}
	if code != "" {
		b.Code = &code
	}
	writeJSON(w, status, map[string]jobs.ErrorBody{"error": b})
}

// writeAPIError answers with e in the OpenAI shape of writeError.
func writeAPIError(w http.ResponseWriter, e *wire.Error) {
	writeError(w, e.Status, e.Type, e.Code, e.Param, e.Message)
}

// writeJSON answers with v as JSON (a json.RawMessage is written as is).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if raw, ok := v.(json.RawMessage); ok {
		w.Write(raw)
		return
	}
	json.NewEncoder(w).Encode(v)
}

type tenantKey struct{}

// withTenant returns ctx carrying the authenticated tenant.
func withTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// tenantOf returns the request's tenant ("default" on an open API).
func tenantOf(r *http.Request) string { return tenantIn(r.Context()) }

// tenantIn is the tenant of a request's context.
func tenantIn(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok {
		return t
	}
	return "default"
}
