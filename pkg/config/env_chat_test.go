package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// No billable Chat parameter is allowed by default; FLEET_CHAT_BILLABLE_PARAMS names
// the ones allowed, and an unknown name is refused naming the variable. Unauthenticated
// connections are bounded by default.
func TestEnvChatBillableParams(t *testing.T) {
	t.Parallel()
	e, err := config.LoadEnvFrom(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.ChatBillableParams) != 0 || e.HTTPMaxUnauthenticatedConns != 1024 {
		t.Errorf("defaults: billable %v, unauthenticated connections %d", e.ChatBillableParams, e.HTTPMaxUnauthenticatedConns)
	}
	e, err = config.LoadEnvFrom(map[string]string{"FLEET_CHAT_BILLABLE_PARAMS": "store,service_tier"})
	if err != nil || !slices.Equal(e.ChatBillableParams, []string{"store", "service_tier"}) {
		t.Errorf("allowed: %v %v", e, err)
	}
	for env, want := range map[string]string{
		"FLEET_CHAT_BILLABLE_PARAMS":           `FLEET_CHAT_BILLABLE_PARAMS: "plugins" is not one of`,
		"FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS": "FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS must be at least 0",
	} {
		val := map[string]string{"FLEET_CHAT_BILLABLE_PARAMS": "plugins", "FLEET_HTTP_MAX_UNAUTHENTICATED_CONNS": "-1"}[env]
		if _, err := config.LoadEnvFrom(map[string]string{env: val}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v", env, val, err)
		}
	}
}
