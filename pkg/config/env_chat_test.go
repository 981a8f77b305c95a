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

// FLEET_REASONING_SECRET unset is the development secret, said to be so; set, its
// comma-separated secrets in order, each at least 32 characters.
func TestEnvReasoningSecret(t *testing.T) {
	t.Parallel()
	e, err := config.LoadEnvFrom(map[string]string{})
	if secrets, dev := e.ReasoningSeal(); err != nil || !dev || !slices.Equal(secrets, []string{config.DevReasoningSecret}) {
		t.Errorf("unset: %v %v %v", secrets, dev, err)
	}
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 40)
	e, err = config.LoadEnvFrom(map[string]string{"FLEET_REASONING_SECRET": a + "," + b})
	if secrets, dev := e.ReasoningSeal(); err != nil || dev || !slices.Equal(secrets, []string{a, b}) {
		t.Errorf("set: %v %v %v", secrets, dev, err)
	}
	if _, err := config.LoadEnvFrom(map[string]string{"FLEET_REASONING_SECRET": a + ",short"}); err == nil || !strings.Contains(err.Error(), "FLEET_REASONING_SECRET: each secret must be at least 32 characters") {
		t.Errorf("a short secret: %v", err)
	}
}
