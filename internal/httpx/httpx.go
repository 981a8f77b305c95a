// Package httpx holds what every HTTP handler of the API shares: the OpenAI error
// shape, JSON answers, and the tenant a request was authenticated as.
package httpx

import (
	"context"
	"encoding/json"
	"net/http"
)

// Error is the OpenAI error body: {"error": {...}}.
type Error struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of an OpenAI error.
type ErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// WriteError answers with an OpenAI-shaped error.
func WriteError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	b := ErrorBody{Message: msg, Type: typ}
	if param != "" {
		b.Param = &param
	}
	if code != "" {
		b.Code = &code
	}
	WriteJSON(w, status, Error{Error: b})
}

// WriteJSON answers with v as JSON (a json.RawMessage is written as is).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if raw, ok := v.(json.RawMessage); ok {
		w.Write(raw)
		return
	}
	json.NewEncoder(w).Encode(v)
}

type tenantKey struct{}

// WithTenant returns ctx carrying the authenticated tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// Tenant returns the request's tenant ("default" on an open API).
func Tenant(r *http.Request) string {
	if t, ok := r.Context().Value(tenantKey{}).(string); ok {
		return t
	}
	return "default"
}
