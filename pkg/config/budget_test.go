package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/state"
)

// A tenant's budget comes from the file, any other tenant's from the environment; bad
// limits are refused with the setting named.
func TestTenantBudgets(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{"tenants":[
		{"id":"a","apiKeyEnv":"A_KEYS","budget":{"usdPerDay":0.05,"searchesPerMonth":100}},
		{"id":"b","apiKeyEnv":"B_KEYS"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := config.LoadEnvFrom(map[string]string{"FLEET_TENANT_BUDGET_USD_PER_MONTH": "20", "FLEET_TENANT_BUDGET_SEARCHES_PER_DAY": "500"})
	if err != nil {
		t.Fatal(err)
	}
	b := f.Budgets(e.DefaultBudget)
	if got := b.For("a"); got != (state.Budget{USDPerDay: 0.05, SearchesPerMonth: 100}) {
		t.Fatalf("a = %+v", got)
	}
	if got := b.For("b"); got != (state.Budget{USDPerMonth: 20, SearchesPerDay: 500}) {
		t.Fatalf("b = %+v, want the environment's default", got)
	}

	_, err = config.ParseFile([]byte(`{"tenants":[{"id":"a","apiKeyEnv":"A","budget":{"usdPerDay":-1}}]}`))
	if err == nil || !strings.Contains(err.Error(), "tenants[0].budget") {
		t.Fatalf("negative budget: %v", err)
	}
	_, err = config.ParseFile([]byte(`{"tenants":[{"id":"a","apiKeyEnv":"A","budget":{"usdPerWeek":1}}]}`))
	if err == nil {
		t.Fatal("unknown budget field accepted")
	}
	if _, err := config.LoadEnvFrom(map[string]string{"FLEET_TENANT_BUDGET_USD_PER_DAY": "-0.5"}); err == nil || !strings.Contains(err.Error(), "FLEET_TENANT_BUDGET_") {
		t.Fatalf("negative env budget: %v", err)
	}
}
