package engines

import (
	"fmt"
	"net/http"
)

// newAnthropic is not built yet.
func newAnthropic(cfg Config, hc *http.Client) (Engine, error) {
	return nil, fmt.Errorf("engine %q: kind %q is not implemented yet", cfg.ID, cfg.Kind)
}
