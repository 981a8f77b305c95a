package engines

import (
	"fmt"
	"net/http"
)

// newGLMChat is not built yet.
func newGLMChat(cfg Config, hc *http.Client) (Engine, error) {
	return nil, fmt.Errorf("engine %q: kind %q is not implemented yet", cfg.ID, cfg.Kind)
}
