package batch

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/searchfleet/searchfleet/pkg/spend"
)

// CapKey is the metadata key that caps a batch's spend: metadata.max_cost_usd, a
// number of US dollars as a string (OpenAI metadata values are strings), e.g.
// {"metadata": {"max_cost_usd": "2.50"}}. It caps the model turns and searches of all
// the batch's jobs together; once spent, their searches get SEARCH_BUDGET_EXHAUSTED
// (budget "batch") and every job still answers.
const CapKey = "max_cost_usd"

// batchCap reads metadata.max_cost_usd (0: no cap).
func batchCap(m map[string]string) (float64, *Error) {
	v, ok := m[CapKey]
	if !ok {
		return 0, nil
	}
	usd, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err == nil {
		err = spend.CheckCap(usd)
	}
	if err != nil {
		return 0, invalid("", "metadata."+CapKey, "metadata.%s %q must be a positive number of US dollars, such as \"2.50\"", CapKey, v)
	}
	return usd, nil
}

// capSpend writes the batch's spending cap before the batch is recorded, so no job of
// it can search before its cap is in place. It lives as long as the batch's record.
func (s *Service) capSpend(ctx context.Context, b *record) error {
	usd, e := batchCap(b.Metadata)
	if e != nil || usd == 0 {
		return nil // validated in newRecord
	}
	if err := s.Store.SetBatchCap(ctx, b.ID, usd, time.Until(b.Expires)+s.Store.RecordRetention()); err != nil {
		s.Log.Error("batch: recording its spending cap", "batch", b.ID, "err", err)
		return unavailable(err, "Could not record the batch; try again.")
	}
	return nil
}
