// Package deploy_test checks the deployment artifacts against the code, by parsing
// them (no Docker or Kubernetes runs here): the Dockerfile builds every command the
// manifests run, every environment variable they set is a real setting, every
// consumer family KEDA scales on (by its backlog metrics) exists in pkg/bus on the
// stream it names, and every metric a dashboard panel or an alert rule uses is one
// pkg/metrics registers.
package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/searchfleet/searchfleet/pkg/bus"
	"github.com/searchfleet/searchfleet/pkg/config"
	"github.com/searchfleet/searchfleet/pkg/metrics"
)

// yamlDocs reads every YAML document of the files matching pattern.
func yamlDocs(t *testing.T, pattern string) map[string][]map[string]any {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s", pattern)
	}
	out := map[string][]map[string]any{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(fh)
		for {
			var doc map[string]any
			err := dec.Decode(&doc)
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("%s: %v", f, err)
				}
				break
			}
			if doc != nil {
				out[f] = append(out[f], doc)
			}
		}
		fh.Close()
	}
	return out
}

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, x := range asList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

// example is config/example.json, the configuration the manifests run.
func example(t *testing.T) *config.File {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "example.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.ParseFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// settings are the variables the fleet reads: the Env struct's tags, the key
// variables the example names, and the base URL overrides of its providers and
// engines.
func settings(t *testing.T) map[string]bool {
	out := map[string]bool{}
	typ := reflect.TypeFor[config.Env]()
	for i := range typ.NumField() {
		if tag := typ.Field(i).Tag.Get("env"); tag != "" {
			out[strings.Split(tag, ",")[0]] = true
		}
	}
	f := example(t)
	for _, v := range f.KeyEnvs() {
		out[v] = true
	}
	for name := range f.Providers {
		out["FLEET_PROVIDER_"+config.EnvID(name)+"_BASE_URL"] = true
		out["FLEET_PROVIDER_"+config.EnvID(name)+"_SEARCH_BASE_URL"] = true
	}
	for _, e := range f.WebSearch.Engines {
		out["FLEET_ENGINE_"+config.EnvID(e.ID)+"_BASE_URL"] = true
	}
	return out
}

// dockerCommands are the commands the Dockerfile builds (./cmd/NAME → NAME).
func dockerCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, m := range regexp.MustCompile(`\./cmd/([a-z0-9-]+)`).FindAllStringSubmatch(string(b), -1) {
		if _, err := os.Stat(filepath.Join("..", "cmd", m[1], "main.go")); err != nil {
			t.Errorf("the Dockerfile builds ./cmd/%s, which has no main.go", m[1])
		}
		cmds = append(cmds, m[1])
	}
	if !strings.Contains(string(b), "CGO_ENABLED=0") || !regexp.MustCompile(`(?m)^USER nonroot`).Match(b) ||
		!regexp.MustCompile(`(?m)^FROM (gcr.io/distroless/static|scratch)`).Match(b) {
		t.Error("the Dockerfile must build static binaries into a distroless or scratch image running as nonroot")
	}
	return cmds
}

// The compose file runs only commands the image has, sets only real settings on the
// fleet's services, scrapes every role, and mounts the files it names.
func TestCompose(t *testing.T) {
	t.Parallel()
	cmds, known := dockerCommands(t), settings(t)
	docs := yamlDocs(t, filepath.Join("compose", "compose.yaml"))
	doc := docs[filepath.Join("compose", "compose.yaml")][0]
	services, _ := get(doc, "services").(map[string]any)
	roles := map[string]int{}
	for name, svc := range services {
		if get(svc, "image") != "searchfleet:latest" {
			continue
		}
		command := strs(get(svc, "command"))
		if len(command) == 0 || !slices.Contains(cmds, command[0]) {
			t.Errorf("service %s runs %v, which the Dockerfile does not build (%v)", name, command, cmds)
			continue
		}
		roles[command[0]]++
		env, _ := get(svc, "environment").(map[string]any)
		for k := range env {
			if !known[k] {
				t.Errorf("service %s sets %s, which is no setting of the fleet", name, k)
			}
		}
		if command[0] != "simulator" && env["FLEET_METRICS_ADDR"] != ":9090" {
			t.Errorf("service %s has no FLEET_METRICS_ADDR :9090 for Prometheus", name)
		}
		for _, v := range strs(get(svc, "volumes")) {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join("compose", src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	for _, r := range []string{"ingress", "chatworker", "searchworker", "simulator"} {
		if roles[r] == 0 {
			t.Errorf("compose runs no %s", r)
		}
	}
	if roles["searchworker"] < 2 {
		t.Error("compose should run search workers per engine")
	}
	for _, name := range []string{"nats-1", "nats-2", "nats-3", "redis", "prometheus", "grafana"} {
		svc := services[name]
		if svc == nil {
			t.Errorf("compose has no %s", name)
			continue
		}
		for _, v := range strs(get(svc, "volumes")) {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join("compose", src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	// Prometheus scrapes every fleet service.
	prom := yamlDocs(t, filepath.Join("compose", "prometheus.yml"))[filepath.Join("compose", "prometheus.yml")][0]
	var scraped []string
	for _, sc := range asList(get(prom, "scrape_configs")) {
		for _, sd := range asList(get(sc, "dns_sd_configs")) {
			scraped = append(scraped, strs(get(sd, "names"))...)
		}
	}
	for name, svc := range services {
		if get(svc, "image") == "searchfleet:latest" && strs(get(svc, "command"))[0] != "simulator" && !slices.Contains(scraped, name) {
			t.Errorf("Prometheus does not scrape %s", name)
		}
	}
}

// The Kubernetes base: each Deployment runs a built command with real settings, has
// liveness and readiness probes on /healthz and /readyz and resource requests, and a
// PodDisruptionBudget; each ScaledObject scales a Deployment of the base on the
// backlog metrics of a consumer family that pkg/bus defines on the stream it names.
func TestKubernetes(t *testing.T) {
	t.Parallel()
	cmds, known := dockerCommands(t), settings(t)
	byKind := map[string]map[string]map[string]any{}
	for file, docs := range yamlDocs(t, filepath.Join("k8s", "*.yaml")) {
		for _, d := range docs {
			kind, _ := d["kind"].(string)
			name, _ := get(d, "metadata", "name").(string)
			if kind == "Kustomization" {
				for _, r := range strs(d["resources"]) {
					if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
						t.Errorf("kustomization lists %s: %v", r, err)
					}
				}
				for _, g := range asList(d["configMapGenerator"]) {
					for _, lit := range strs(get(g, "literals")) {
						k, _, _ := strings.Cut(lit, "=")
						if !known[k] {
							t.Errorf("ConfigMap %v sets %s, which is no setting of the fleet", get(g, "name"), k)
						}
					}
				}
				continue
			}
			if byKind[kind] == nil {
				byKind[kind] = map[string]map[string]any{}
			}
			if byKind[kind][name] != nil {
				t.Errorf("%s: %s %s defined twice", file, kind, name)
			}
			byKind[kind][name] = d
		}
	}
	if len(byKind["Deployment"]) == 0 {
		t.Fatal("no Deployments")
	}
	for name, d := range byKind["Deployment"] {
		for _, c := range asList(get(d, "spec", "template", "spec", "containers")) {
			command := strs(get(c, "command"))
			if len(command) == 0 || !slices.Contains(cmds, command[0]) {
				t.Errorf("Deployment %s runs %v, which the Dockerfile does not build", name, command)
			}
			for _, e := range asList(get(c, "env")) {
				if k, _ := get(e, "name").(string); !known[k] {
					t.Errorf("Deployment %s sets %s, which is no setting of the fleet", name, k)
				}
			}
			if get(c, "livenessProbe", "httpGet", "path") != "/healthz" || get(c, "readinessProbe", "httpGet", "path") != "/readyz" {
				t.Errorf("Deployment %s: probes must be /healthz (liveness) and /readyz (readiness)", name)
			}
			if get(c, "resources", "requests", "cpu") == nil || get(c, "resources", "requests", "memory") == nil {
				t.Errorf("Deployment %s has no resource requests", name)
			}
		}
		covered := false
		for _, p := range byKind["PodDisruptionBudget"] {
			if reflect.DeepEqual(get(p, "spec", "selector", "matchLabels"), get(d, "spec", "selector", "matchLabels")) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("Deployment %s has no PodDisruptionBudget", name)
		}
	}

	// The consumer families the fleet defines, by name, with their stream: a
	// ScaledObject queries the metrics of their backlog (lanes included).
	streamOf := map[string]string{}
	specs := []bus.ConsumerSpec{bus.ChatConsumer(bus.Timing{}), bus.ResumeConsumer(bus.Timing{}),
		bus.WebhookConsumer(bus.Timing{}), bus.ExpandConsumer(bus.Timing{}), bus.FinisherConsumer(bus.Timing{})}
	for _, e := range example(t).WebSearch.Engines {
		specs = append(specs, bus.SearchConsumer(e.ID, bus.Timing{}))
	}
	for _, s := range specs {
		streamOf[s.Config.Durable] = s.Stream
	}
	registered := metrics.New().Names()
	family := regexp.MustCompile(`\{stream="([^"]+)",consumer="([^"]+)"\}`)
	scaled := map[string]bool{}
	for name, so := range byKind["ScaledObject"] {
		target, _ := get(so, "spec", "scaleTargetRef", "name").(string)
		if byKind["Deployment"][target] == nil {
			t.Errorf("ScaledObject %s scales %q, no Deployment of the base", name, target)
		}
		for _, tr := range asList(get(so, "spec", "triggers")) {
			query, _ := get(tr, "metadata", "query").(string)
			if get(tr, "type") != "prometheus" || get(tr, "metadata", "serverAddress") == nil || get(tr, "metadata", "threshold") == nil {
				t.Errorf("ScaledObject %s: trigger %v, want prometheus with a serverAddress, a query and a threshold", name, tr)
				continue
			}
			used := promQL.FindAllString(query, -1)
			if !slices.Contains(used, "fleet_consumer_pending_messages") || !slices.Contains(used, "fleet_consumer_ack_pending_messages") {
				t.Errorf("ScaledObject %s: %q does not add waiting and in-flight messages", name, query)
			}
			for _, m := range used {
				if _, found := slices.BinarySearch(registered, m); !found {
					t.Errorf("ScaledObject %s uses %s, which pkg/metrics does not register", name, m)
				}
			}
			sel := family.FindAllStringSubmatch(query, -1)
			if len(sel) == 0 {
				t.Errorf("ScaledObject %s: %q selects no stream and consumer", name, query)
			}
			for _, m := range sel {
				if want, ok := streamOf[m[2]]; !ok || want != m[1] {
					t.Errorf("ScaledObject %s scales on %s/%s; pkg/bus has no such consumer on that stream", name, m[1], m[2])
				}
				scaled[m[2]] = true
			}
		}
	}
	// Every engine's family and the chat workers' are scaled.
	for _, s := range specs {
		if (s.Stream == bus.StreamSearch || s.Stream == bus.StreamChat || s.Config.Durable == bus.ConsumerChat) && !scaled[s.Config.Durable] {
			t.Errorf("no ScaledObject scales on %s/%s", s.Stream, s.Config.Durable)
		}
	}
}

// promQL finds the metric names an expression uses: the fleet's, Go's and the
// process's (the only families the fleet's processes export).
var promQL = regexp.MustCompile(`\b(?:fleet|go|process)_[a-z0-9_]+\b`)

// Every metric the dashboard and the alert rules use is registered by pkg/metrics.
func TestDashboardsAndAlertsUseRealMetrics(t *testing.T) {
	t.Parallel()
	registered := metrics.New().Names()
	check := func(where, expr string) {
		used := promQL.FindAllString(expr, -1)
		if len(used) == 0 {
			t.Errorf("%s: %q uses no fleet metric", where, expr)
		}
		for _, name := range used {
			if _, found := slices.BinarySearch(registered, name); !found {
				t.Errorf("%s uses %s, which pkg/metrics does not register", where, name)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("grafana", "searchfleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			check("dashboard panel "+p.Title, tg.Expr)
			exprs++
		}
	}
	alerts := yamlDocs(t, filepath.Join("prometheus", "alerts.yml"))[filepath.Join("prometheus", "alerts.yml")][0]
	names := map[string]bool{}
	for _, g := range asList(alerts["groups"]) {
		for _, r := range asList(get(g, "rules")) {
			name, _ := get(r, "alert").(string)
			expr, _ := get(r, "expr").(string)
			check("alert "+name, expr)
			names[name] = true
		}
	}
	if exprs < 10 {
		t.Errorf("the dashboard has %d queries", exprs)
	}
	for _, want := range []string{"SearchfleetDLQGrowing", "SearchfleetConsumerLagRising", "SearchfleetJobNearDeadline", "SearchfleetWebhookFailures"} {
		if !names[want] {
			t.Errorf("no alert %s", want)
		}
	}
	// The check can fail: a made-up metric is caught.
	if _, found := slices.BinarySearch(registered, "fleet_made_up_total"); found {
		t.Error("Names lists a metric nobody registers")
	}
}
