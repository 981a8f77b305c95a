package config_test

import (
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// A fresh fleet's records bucket is bounded, below the files bound plus the EVENTS
// bound that share its JetStream store, and holds several tenants at the default
// storage quota.
func TestEnvRecordsBoundByDefault(t *testing.T) {
	t.Parallel()
	e, err := config.LoadEnvFrom(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	quota := config.NewTenantLimits(e.TenantLimits, nil).Of("any").StorageBytes
	if e.RecordsMaxBytes <= 0 || e.RecordsMaxBytes > e.FilesMaxBytes+e.EventsMaxBytes || e.RecordsMaxBytes < 8*quota {
		t.Fatalf("FLEET_RECORDS_MAX_BYTES defaults to %d (files %d, events %d, a tenant's quota %d)", e.RecordsMaxBytes, e.FilesMaxBytes, e.EventsMaxBytes, quota)
	}
	if e, err := config.LoadEnvFrom(map[string]string{"FLEET_RECORDS_MAX_BYTES": "0"}); err != nil || e.RecordsMaxBytes != 0 {
		t.Fatalf("0 (no bound) is refused: %v", err)
	}
}
