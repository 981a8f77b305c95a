package engines

import (
	"fmt"
	"net/http"
)

// newOpenRouter is not built yet.
func newOpenRouter(cfg Config, hc *http.Client) (Engine, error) {
	return nil, fmt.Errorf("engine %q: kind %q is not implemented yet", cfg.ID, cfg.Kind)
}
