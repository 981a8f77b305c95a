package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// The HTTP deadlines have defaults, and bad ones are refused naming the variable.
func TestEnvHTTPDeadlines(t *testing.T) {
	t.Parallel()
	e, err := env.ParseAsWithOptions[config.Env](env.Options{Environment: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if e.HTTPHeaderTimeout != 10*time.Second || e.HTTPIdleTimeout != time.Minute || e.HTTPBodyTimeout != 30*time.Second ||
		e.HTTPUploadTimeout != 10*time.Minute || e.SSEMaxDuration != 30*time.Minute {
		t.Errorf("defaults: header %s idle %s body %s upload %s sse %s", e.HTTPHeaderTimeout, e.HTTPIdleTimeout, e.HTTPBodyTimeout, e.HTTPUploadTimeout, e.SSEMaxDuration)
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	e.HTTPIdleTimeout, e.HTTPBodyTimeout, e.HTTPUploadTimeout, e.SSEMaxDuration = 0, time.Minute, time.Second, e.JobTimeout
	err = e.Validate()
	for _, v := range []string{"FLEET_HTTP_IDLE_TIMEOUT must be positive", "FLEET_HTTP_UPLOAD_TIMEOUT (1s) must not be shorter", "FLEET_SSE_MAX_DURATION"} {
		if err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("error does not say %q: %v", v, err)
		}
	}
}

// The per-tenant limits have documented defaults, read from FLEET_TENANT_*; a
// tenant's own limits override them field by field, and a negative one lifts it.
func TestTenantLimits(t *testing.T) {
	t.Parallel()
	e, err := config.LoadEnvFrom(map[string]string{"FLEET_TENANT_RPS": "5", "FLEET_TENANT_STREAMS": "0"})
	if err != nil {
		t.Fatal(err)
	}
	d := e.TenantLimits
	if d.RequestsPerSecond != 5 || d.Burst != 40 || d.Streams != 0 || d.SyncWaits != 64 || d.QueuedJobs != 512 || d.FileBytes != 2<<30 {
		t.Errorf("defaults: %+v", d)
	}
	own := config.Limits{SyncWaits: 3, QueuedJobs: -1}.Or(d)
	if own.SyncWaits != 3 || own.QueuedJobs != 0 || own.RequestsPerSecond != 5 || own.Files != 1000 {
		t.Errorf("tenant's own: %+v", own)
	}
	if _, err := config.LoadEnvFrom(map[string]string{"FLEET_TENANT_FILES": "-1"}); err == nil {
		t.Error("a negative default was accepted")
	}
}
