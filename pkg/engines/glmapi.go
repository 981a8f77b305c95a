package engines

import (
	"fmt"
	"net/http"
)

// newGLMAPI is not built yet.
func newGLMAPI(cfg Config, hc *http.Client) (Engine, error) {
	return nil, fmt.Errorf("engine %q: kind %q is not implemented yet", cfg.ID, cfg.Kind)
}
