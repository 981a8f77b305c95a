package engines

import (
	"fmt"
	"net/http"
)

// newSearXNG is not built yet.
func newSearXNG(cfg Config, hc *http.Client) (Engine, error) {
	return nil, fmt.Errorf("engine %q: kind %q is not implemented yet", cfg.ID, cfg.Kind)
}
