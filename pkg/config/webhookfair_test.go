package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// The webhook fairness settings default to a tenant cap of 8, a host cap of 16, a
// pool of 64 and a 1 s hold-back, and a value that would stop deliveries is refused
// by name.
func TestWebhookFairnessSettings(t *testing.T) {
	t.Parallel()
	e, err := config.LoadEnvFrom(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if e.WebhookTenantInFlight != 8 || e.WebhookHostInFlight != 16 || e.WebhookPool != 64 || e.WebhookDefer != time.Second {
		t.Errorf("defaults: tenant %d, host %d, pool %d, defer %v", e.WebhookTenantInFlight, e.WebhookHostInFlight, e.WebhookPool, e.WebhookDefer)
	}
	_, err = config.LoadEnvFrom(map[string]string{"FLEET_WEBHOOK_TENANT_IN_FLIGHT": "0", "FLEET_WEBHOOK_HOST_IN_FLIGHT": "-1",
		"FLEET_WEBHOOK_POOL": "0", "FLEET_WEBHOOK_DEFER": "0s"})
	for _, v := range []string{"FLEET_WEBHOOK_TENANT_IN_FLIGHT", "FLEET_WEBHOOK_HOST_IN_FLIGHT", "FLEET_WEBHOOK_POOL", "FLEET_WEBHOOK_DEFER"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error %v does not name %s", err, v)
		}
	}
}
