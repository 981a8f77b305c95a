package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/spend"
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
	if got := b.For("a"); got != (spend.Budget{USDPerDay: 0.05, SearchesPerMonth: 100}) {
		t.Fatalf("a = %+v", got)
	}
	if got := b.For("b"); got != (spend.Budget{USDPerMonth: 20, SearchesPerDay: 500}) {
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

// A model route's token prices are read and validated: a negative or unknown price
// is refused with the route named.
func TestModelPricing(t *testing.T) {
	t.Parallel()
	const route = `{"providers":{"p":{"kind":"openai","baseURL":"http://127.0.0.1:1/v1"}},"models":{"m":{"provider":"p","model":"up","pricing":%s}}}`
	f, err := config.ParseFile([]byte(strings.Replace(route, "%s", `{"inputPerMTokUSD":3,"outputPerMTokUSD":15}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := f.Models["m"].Pricing; p == nil || *p != (spend.Pricing{InputPerMTokUSD: 3, OutputPerMTokUSD: 15}) {
		t.Fatalf("pricing = %+v", p)
	}
	f, err = config.ParseFile([]byte(strings.Replace(route, "%s", `{"inputPerMTokUSD":-3}`, 1)))
	if err == nil {
		err = f.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), `models["m"].pricing`) {
		t.Fatalf("negative price: %v", err)
	}
	if _, err := config.ParseFile([]byte(strings.Replace(route, "%s", `{"cachedPerMTokUSD":1}`, 1))); err == nil {
		t.Fatal("unknown pricing field accepted")
	}
}
