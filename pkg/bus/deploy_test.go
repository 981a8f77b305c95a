package bus_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/bus"
)

var update = flag.Bool("update", false, "rewrite deploy/nats from the Go definitions")

// deployFiles are the operator copies of the stream and consumer definitions, in the
// JSON the NATS CLI takes (`nats stream add --config FILE`, `nats consumer add STREAM
// --config FILE`). The search consumer is a template: replace ENGINE.
func deployFiles() map[string]any {
	files := map[string]any{}
	for _, s := range bus.Streams(bus.DefaultLimits) {
		files["stream-"+s.Name+".json"] = s
	}
	for _, c := range []bus.ConsumerSpec{
		bus.ChatConsumer(bus.TimingFor(bus.ConsumerChat)),
		bus.ResumeConsumer(bus.TimingFor(bus.ConsumerResume)),
		bus.WebhookConsumer(bus.TimingFor(bus.ConsumerWebhooks)),
		bus.ExpandConsumer(bus.TimingFor(bus.ConsumerExpand)),
		bus.FinisherConsumer(bus.TimingFor(bus.ConsumerFinisher)),
		bus.ResearchConsumer(bus.TimingFor(bus.ConsumerResearch)),
		bus.SearchConsumer("ENGINE", bus.TimingFor(bus.ConsumerSearch("ENGINE"))),
		bus.FetchConsumer(bus.TimingFor(bus.ConsumerFetch)),
		bus.DeadLetterConsumer(),
		bus.IngressDeadLetterConsumer(),
	} {
		files["consumer-"+c.Stream+"-"+c.Config.Durable+".json"] = c.Config
	}
	return files
}

// TestDeployFilesMatch keeps deploy/nats/ identical to the definitions in subjects.go.
// After changing those, run: go test ./pkg/bus -run TestDeployFilesMatch -update
func TestDeployFilesMatch(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "deploy", "nats")
	want := deployFiles()
	for name, v := range want {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (run with -update)", name, err)
			continue
		}
		if string(got) != string(b) {
			t.Errorf("%s differs from pkg/bus/subjects.go (run with -update):\n%s", name, b)
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".json" {
			if _, ok := want[e.Name()]; !ok {
				t.Errorf("deploy/nats/%s has no definition in pkg/bus", e.Name())
			}
		}
	}
}
