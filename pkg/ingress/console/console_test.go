package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/searchfleet/searchfleet/internal/testkit/fleettest"
	"github.com/searchfleet/searchfleet/pkg/config"
)

// chromium finds the browser: CHROME_BIN, else chromium on PATH (Debian's package, which
// scripts/ensure-chromium.sh installs). Without one the test skips, except in CI
// (CI=true), where it fails.
func chromium(t *testing.T) string {
	if p := os.Getenv("CHROME_BIN"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: CI runs scripts/ensure-chromium.sh before the tests")
	}
	t.Skip("chromium is not installed (run scripts/ensure-chromium.sh, or set CHROME_BIN): the console's browser test is skipped")
	return ""
}

// browser starts a headless chromium with a fresh profile for the test. The
// background-networking flags keep it from calling out (this test reaches 127.0.0.1
// only).
func browser(t *testing.T) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

const acmeKey = "sk-console-acme"

// The console, in a real browser, against a real fleet with tenants: signing in with a
// tenant key, submitting a job and watching it complete, its trace with queries,
// engines and sources, each citation marker linked to its source, a replay, a batch
// followed live to its end, spend per day and model, and the engines' health; text
// from the request is shown as text; another tenant's jobs never appear. It saves a
// screenshot of the finished job (testdata/out/console.png, and CONSOLE_SCREENSHOT if
// set).
func TestConsoleInBrowser(t *testing.T) {
	ctx := browser(t)
	f := fleettest.Start(t, fleettest.File(func(f *config.File) {
		f.Tenants = []config.Tenant{
			{ID: "acme", APIKeyEnv: "ACME_KEY", APIKeys: []string{acmeKey}},
			{ID: "globex", APIKeyEnv: "GLOBEX_KEY", APIKeys: []string{"sk-console-globex"}},
		}
	}))
	// Another tenant's job, which acme must never see.
	var other struct{ ID string }
	apiCall(t, f, "sk-console-globex", "POST", "/v1/jobs", ask("Search the web for globex plans"), &other)

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			shot(t, ctx, "failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	until := func(what, js string) {
		t.Helper()
		do(what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(80*time.Second)))
	}
	eval := func(js string, out any) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v (%s)", js, err, b)
		}
	}
	text := func(sel string) string {
		var s string
		eval(fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel), &s)
		return s
	}

	// Sign in: a wrong key is refused, the tenant's key is taken.
	do("open the console", chromedp.Navigate(f.URL+"/console/"), chromedp.WaitVisible(chromedp.CSS("#login")))
	do("a wrong key", chromedp.SendKeys(chromedp.CSS("#key"), "sk-wrong"), chromedp.Click(chromedp.CSS("#login-submit")))
	until("the wrong key refused", `document.querySelector("#login-error").textContent.includes("not accepted")`)
	do("sign in", chromedp.Evaluate[chromedp.Void](`document.querySelector("#key").value = ""`), chromedp.SendKeys(chromedp.CSS("#key"), acmeKey),
		chromedp.Click(chromedp.CSS("#login-submit")), chromedp.WaitVisible(chromedp.CSS("#new-job")))

	// Submit a job whose question carries markup: it must show as text.
	question := "Search the web for the latest news about <b>NATS</b> JetStream"
	do("submit a job", chromedp.SendKeys(chromedp.CSS("#question"), question), chromedp.Click(chromedp.CSS("#submit-job")))
	until("the job page", `location.hash.startsWith("#/jobs/job_")`)
	var hash string
	eval(`location.hash`, &hash)
	jobID := strings.TrimPrefix(hash, "#/jobs/")
	until("the job to complete", `document.querySelector("#status [data-status=completed]") && document.querySelector("#answer a.cite")`)

	// Each citation marker links to the source of its number, as the API numbers them.
	var job struct {
		Model    string
		Response struct {
			Searchfleet struct{ Sources []struct{ Title, URL string } }
		}
	}
	apiCall(t, f, acmeKey, "GET", "/v1/jobs/"+jobID, nil, &job)
	sources := job.Response.Searchfleet.Sources
	var cites []struct{ N, Href, Text string }
	eval(`[...document.querySelectorAll("#answer a.cite")].map(a => ({n: a.dataset.n, href: a.getAttribute("href"), text: a.textContent}))`, &cites)
	if len(cites) == 0 || len(sources) == 0 {
		t.Fatalf("cites %v, sources %v: want both", cites, sources)
	}
	for _, c := range cites {
		var n int
		fmt.Sscan(c.N, &n)
		if n < 1 || n > len(sources) || !sameURL(c.Href, sources[n-1].URL) || c.Text != fmt.Sprintf("[%d]", n) {
			t.Errorf("citation %s links to %q, want source %d of %d (%v)", c.Text, c.Href, n, len(sources), sources)
		}
	}
	var listed []string
	eval(`[...document.querySelectorAll("#sources li a")].map(a => a.getAttribute("href"))`, &listed)
	if len(listed) != len(sources) {
		t.Errorf("sources list has %d links, the job %d sources", len(listed), len(sources))
	}
	if got := text("#question-text"); got != question {
		t.Errorf("the job page shows the question %q, want %q as text", got, question)
	}
	// The trace shows the query, the engine and the sources each search returned.
	if q := text("#trace td.query"); q == "" || !strings.Contains(text("#trace td.engine"), "google") {
		t.Errorf("trace query %q engine %q, want the search and its engine", q, text("#trace td.engine"))
	}
	var traceLinks int
	eval(`document.querySelectorAll("#trace ol li a").length`, &traceLinks)
	if traceLinks == 0 {
		t.Error("the trace lists no sources")
	}
	shot(t, ctx, "console") // a finished job with its answer, sources and trace

	// Replay: a new job answered from the recorded searches, linked to the original.
	do("replay", chromedp.Click(chromedp.CSS("#replay")))
	until("the replay's page", fmt.Sprintf(`location.hash !== %q && document.querySelector("#replay-of")`, hash))
	if got := text("#replay-of"); got != jobID {
		t.Errorf("replay of %q, want %s", got, jobID)
	}
	until("the replay to complete", `document.querySelector("#status [data-status=completed]")`)

	// The jobs list: acme's two jobs, the question as text, nothing of globex's.
	do("jobs list", hashTo("#/jobs"))
	until("both jobs listed", `document.querySelectorAll("#jobs tr[data-id]").length === 2`)
	var markup bool
	eval(`!!document.querySelector("#jobs td.question b")`, &markup)
	if markup || !strings.Contains(text(fmt.Sprintf(`#jobs tr[data-id=%q] td.question`, jobID)), "<b>NATS</b>") {
		t.Errorf("the question was rendered as markup, or is missing: %q", text("#jobs"))
	}
	if strings.Contains(text("#jobs"), other.ID) {
		t.Error("acme's list shows globex's job")
	}
	do("another tenant's job", hashTo("#/jobs/"+other.ID))
	until("refused", `(document.querySelector("#page-error") || {}).textContent?.includes("No job")`)

	// A batch, followed live over server-sent events to its end.
	do("batches", hashTo("#/batches"), chromedp.WaitVisible(chromedp.CSS("#new-batch")))
	do("start a batch", chromedp.SendKeys(chromedp.CSS("#queries"), "Search the web for Redis news\nSearch the web for Go news\n"),
		chromedp.Click(chromedp.CSS("#submit-batch")))
	until("the batch to complete", `document.querySelector("#batch-status [data-status=completed]")`)
	if got := text("#batch-counts"); got != "2 / 2 completed, 0 failed" {
		t.Errorf("batch counts %q", got)
	}
	if got := text("#batch-updates"); !strings.Contains(got, "live update") {
		t.Errorf("batch updates %q: the progress stream delivered nothing", got)
	}
	until("the batch's output linked to its jobs", `document.querySelectorAll("#output-lines a[href^='#/jobs/']").length === 2`)

	// Spend per day and model: the four jobs (all of the model the form offered first),
	// once the finish hook has counted them.
	today := time.Now().UTC().Format(time.DateOnly)
	do("spend", hashTo("#/spend"), chromedp.WaitVisible(chromedp.CSS("#spend")))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		// The page reads the spend when shown: show it again (hashchange re-routes).
		do("spend", chromedp.Evaluate[chromedp.Void](`window.dispatchEvent(new HashChangeEvent("hashchange"))`),
			chromedp.WaitVisible(chromedp.CSS("#spend")))
		if text(fmt.Sprintf(`#spend tr[data-day=%q][data-model=%q] td.jobs`, today, job.Model)) == "4" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spend page: %q, want 4 %s jobs today", text("#spend"), job.Model)
		}
	}
	if s := text(fmt.Sprintf(`#spend tr[data-model=%q] td.spent`, job.Model)); s == "" || s == "$0.0000" {
		t.Errorf("spent %q, want the searches' cost", s)
	}

	// Engine health from the fleet's metrics.
	do("engines", hashTo("#/engines"))
	// Shares, not counts: no tenant sees the others' volume.
	until("the engine that searched", `/ok: [1-9][0-9.]*%/.test((document.querySelector("#engines tr[data-engine=google] td.outcomes") || {}).textContent || "")`)

	// A research run: started from the research page, its plan shown as a tree of
	// sub-questions with each child's job and sources, its report's citations linked
	// to the run's sources.
	do("research", hashTo("#/research"), chromedp.WaitVisible(chromedp.CSS("#run-form")))
	do("start a run", chromedp.SendKeys(chromedp.CSS("#run-question"), "How do <i>tides</i> work?"),
		chromedp.SetValue(chromedp.CSS("#run-effort"), "low"), chromedp.Click(chromedp.CSS("#run-submit")))
	until("the run page", `location.hash.startsWith("#/research/rr_")`)
	until("the run to complete", `document.querySelector("#status [data-status=completed]") && document.querySelector("#report a.cite")`)
	eval(`location.hash`, &hash)
	var run struct {
		Rounds []struct {
			Questions []struct {
				JobID string `json:"job_id"`
			}
		}
		Output struct{ Sources []struct{ URL string } }
	}
	apiCall(t, f, acmeKey, "GET", "/v1/research/"+strings.TrimPrefix(hash, "#/research/"), nil, &run)
	var children []string
	eval(`[...document.querySelectorAll("#plan-tree li.subq > span > a")].map(a => a.textContent)`, &children)
	if len(run.Rounds) == 0 || len(children) != len(run.Rounds[0].Questions) || children[0] != run.Rounds[0].Questions[0].JobID {
		t.Errorf("plan tree children %v, run %+v", children, run.Rounds)
	}
	var runCites []struct{ N, Href string }
	eval(`[...document.querySelectorAll("#report a.cite")].map(a => ({n: a.dataset.n, href: a.getAttribute("href")}))`, &runCites)
	for _, c := range runCites {
		var n int
		fmt.Sscan(c.N, &n)
		if n < 1 || n > len(run.Output.Sources) || !sameURL(c.Href, run.Output.Sources[n-1].URL) {
			t.Errorf("report citation [%d] links to %q", n, c.Href)
		}
	}
	do("the runs list", hashTo("#/research"))
	until("the run listed", `document.querySelectorAll("#runs tbody tr").length === 1 && !document.querySelector("#runs td i")`)
}

// hashTo shows a page of the console, as following a link does.
func hashTo(h string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", h))
}

// sameURL compares a link's href with the source URL it should be (the console writes
// the URL as the browser's URL parser normalizes it).
func sameURL(href, want string) bool {
	if href == want {
		return true
	}
	return strings.ReplaceAll(href, "%20", " ") == strings.ReplaceAll(want, "%20", " ")
}

// shot saves a full-page screenshot as testdata/out/<name>.png (ignored by git) and,
// for "console", also to CONSOLE_SCREENSHOT when set (docs/console.png).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	paths := []string{filepath.Join("testdata", "out", name+".png")}
	if p := os.Getenv("CONSOLE_SCREENSHOT"); p != "" && name == "console" {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
}

func apiCall(t *testing.T, f *fleettest.Fleet, key, method, path string, body, out any) {
	t.Helper()
	var rd bytes.Buffer
	if body != nil {
		json.NewEncoder(&rd).Encode(body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, f.URL+path, &rd)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b.String())
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}
