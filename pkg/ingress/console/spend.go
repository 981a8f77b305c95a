package console

import (
	"context"

	"github.com/searchfleet/searchfleet/pkg/state"
)

// ModelSpend is the finish hook that counts each ended job in its tenant's spend per
// day and model (GET /v1/usage/daily); it runs beside the other hooks in the ingress
// role's finisher.
type ModelSpend struct {
	Store interface {
		RecordModelSpend(ctx context.Context, job *state.Job) error
	}
}

// JobFinished counts job once.
func (m ModelSpend) JobFinished(ctx context.Context, job *state.Job) error {
	return m.Store.RecordModelSpend(ctx, job)
}
