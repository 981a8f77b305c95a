package engines

import (
	"fmt"
	"net/http"
)

// newSerper is not built yet.
func newSerper(cfg Config, hc *http.Client) (Engine, error) {
	return nil, fmt.Errorf("engine %q: kind %q is not implemented yet", cfg.ID, cfg.Kind)
}
