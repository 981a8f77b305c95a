package ingress

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/searchfleet/searchfleet/internal/redact"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// consoleCore is the ingress as the console's routes see it (console.Core).
type consoleCore struct{ s *Server }

func (c consoleCore) Tenant(r *http.Request) string { return tenantOf(r) }

func (c consoleCore) Job(w http.ResponseWriter, r *http.Request) *state.Job { return c.s.loadJob(w, r) }

func (c consoleCore) ListLimit(w http.ResponseWriter, v string, def, most int) (int, bool) {
	return listLimit(w, v, def, most)
}

func (c consoleCore) ValidJobID(id string) bool { return validJobID(id) }

// OpenStream holds one of the tenant's streams and the stream's deadline until done.
func (c consoleCore) OpenStream(w http.ResponseWriter, r *http.Request, tenant string) (context.Context, func(), bool) {
	release, ok := c.s.admitWait(w, r, chatCodec, tenant, holdStream)
	if !ok {
		return nil, nil, false
	}
	ctx, cancel := c.s.stream(w, r)
	return ctx, func() { cancel(); release() }, true
}

func (c consoleCore) JSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

func (c consoleCore) Error(w http.ResponseWriter, status int, typ, code, param, msg string) {
	writeError(w, status, typ, code, param, msg)
}

func (c consoleCore) BatchError(w http.ResponseWriter, err error) { writeBatchError(w, err) }

func (c consoleCore) LogFailure(ctx context.Context, msg string, args ...any) {
	c.s.logFailure(ctx, msg, args...)
}

func (c consoleCore) Question(req json.RawMessage, clipped bool) string {
	if clipped {
		return redact.Clip(questionOf(req), questionChars)
	}
	return questionOf(req)
}
