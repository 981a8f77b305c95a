package research

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm/wire"
)

// The brain's steps are plain model calls: a system prompt that says the step (its
// first line, "searchfleet research: <step>", is how the simulator knows it), and a
// user message holding the step's material as one JSON object. Each answer is read
// leniently: a JSON object anywhere in the text, with a fallback for each step.

const (
	planSystem = `searchfleet research: plan
You plan a research investigation. Break the question into at most max_questions sub-questions that together answer it; each is searched and read on the web by a separate researcher. For each, say what it must establish.
Answer with one JSON object and nothing else: {"questions": [{"question": "...", "establish": "..."}]}`
	reflectSystem = `searchfleet research: reflect
You review a research investigation's findings so far. Name the gaps that keep the findings from answering the question: at most max_gaps further sub-questions, none that was asked already. Name none when the findings suffice.
Answer with one JSON object and nothing else: {"gaps": [{"question": "...", "establish": "..."}]}`
	writeSystem = `searchfleet research: write
You write a research report from the findings given. Every claim cites its sources with [n] markers, n being a source's number in sources; cite only the sources given, and only for what they say. Write Markdown; do not add a source list (it is added for you).
When output_schema is given, also answer it: an object that validates against the schema, and for each top-level field its basis: the numbers of the sources it rests on, your reasoning, and a confidence of low, medium or high.
Answer with one JSON object and nothing else: {"report": "...", "object": {...}, "basis": {"field": {"citations": [1], "reasoning": "...", "confidence": "medium"}}}`
	childSystem = `You are one researcher of a research investigation. Search the web (and read pages where a search result is not enough) to answer the question, and establish what it asks. Answer briefly and cite every claim with its source's [n] marker.`
)

// brainRequest is a brain call: the step's system prompt, the material as JSON.
func brainRequest(system string, material any) *wire.Request {
	b, _ := json.MarshalIndent(material, "", " ")
	return &wire.Request{System: system, MaxTokens: defaultMaxOutput,
		Messages: []wire.Message{{Role: wire.RoleUser, Parts: []wire.Part{{Kind: wire.PartText, Text: "```json\n" + string(b) + "\n```"}}}}}
}

func planRequest(req *Request, e Effort) *wire.Request {
	return brainRequest(planSystem, map[string]any{"question": req.Input, "instructions": req.Instructions, "max_questions": e.Breadth})
}

// findingBrief is a finding as the reflection and writer read it.
type findingBrief struct {
	Question string `json:"question"`
	Text     string `json:"text"`
}

func reflectRequest(req *Request, e Effort, fs []Finding) *wire.Request {
	var briefs []findingBrief
	for _, f := range fs {
		briefs = append(briefs, findingBrief{Question: f.Question, Text: clip(f.Text, 2000)})
	}
	return brainRequest(reflectSystem, map[string]any{"question": req.Input, "findings": briefs, "max_gaps": e.PerRound})
}

func writeRequest(req *Request, fs []findingBrief, sources []Source) *wire.Request {
	m := map[string]any{"question": req.Input, "instructions": req.Instructions, "findings": fs, "sources": sources}
	if len(req.OutputSchema) > 0 {
		m["output_schema"] = req.OutputSchema
	}
	return brainRequest(writeSystem, m)
}

// jsonObject finds the JSON object in a model's answer (fenced or bare) and decodes
// it into v.
func jsonObject(text string, v any) bool {
	text = strings.TrimSpace(text)
	if i := strings.Index(text, "{"); i >= 0 {
		if j := strings.LastIndex(text, "}"); j > i {
			return json.Unmarshal([]byte(text[i:j+1]), v) == nil
		}
	}
	return false
}

func parsePlan(text string, n int) Plan {
	var p Plan
	jsonObject(text, &p)
	p.Questions = clean(p.Questions, n)
	return p
}

func parseReflection(text string, n int, asked map[string]bool) Reflection {
	var r Reflection
	jsonObject(text, &r)
	var gaps []SubQuestion
	for _, g := range r.Gaps {
		if !asked[strings.TrimSpace(g.Question)] {
			gaps = append(gaps, g)
		}
	}
	r.Gaps = clean(gaps, n)
	return r
}

// parseDraft reads the writer's answer: its report, and its object with the basis,
// whose citation numbers become the sources they name (numbers no source has are
// dropped). An answer that is not such an object is the report itself.
func parseDraft(text string, sources []Source) Draft {
	var a struct {
		Report string          `json:"report"`
		Object json.RawMessage `json:"object"`
		Basis  map[string]struct {
			Citations  []int  `json:"citations"`
			Reasoning  string `json:"reasoning"`
			Confidence string `json:"confidence"`
		} `json:"basis"`
	}
	if !jsonObject(text, &a) || a.Report == "" {
		return Draft{Report: strings.TrimSpace(text), Sources: sources}
	}
	d := Draft{Report: a.Report, Sources: sources}
	if len(a.Object) > 0 && string(a.Object) != "null" {
		d.Object = a.Object
		d.Basis = map[string]Basis{}
		for k, b := range a.Basis {
			d.Basis[k] = Basis{Citations: cited(b.Citations, sources), Reasoning: b.Reasoning, Confidence: confidence(b.Confidence)}
		}
	}
	return d
}

func confidence(c string) string {
	switch c {
	case "low", "medium", "high":
		return c
	}
	return "low"
}

// cited are the sources numbers name, each once, numbers no source has dropped.
func cited(ns []int, sources []Source) []Source {
	out := []Source{}
	seen := map[int]bool{}
	for _, n := range ns {
		if n >= 1 && n <= len(sources) && !seen[n] {
			seen[n] = true
			out = append(out, sources[n-1])
		}
	}
	return out
}

var markerRE = regexp.MustCompile(`\[(\d{1,3})\]`)

// number gives the sources the findings cite one numbering for the run (each URL
// once, in the order the findings cite them) and rewrites each finding's markers
// into it.
func number(fs []Finding) ([]Source, []findingBrief) {
	var sources []Source
	byURL := map[string]int{}
	var briefs []findingBrief
	for _, f := range fs {
		if f.Status != "completed" || f.Text == "" {
			continue
		}
		// Only the sources the finding cites are numbered: the report lists what it
		// rests on.
		local := map[int]int{}
		for _, m := range markerRE.FindAllStringSubmatch(f.Text, -1) {
			k, _ := strconv.Atoi(m[1])
			if k < 1 || k > len(f.Sources) || local[k] != 0 {
				continue
			}
			s := f.Sources[k-1]
			n, ok := byURL[s.URL]
			if !ok {
				n = len(sources) + 1
				byURL[s.URL] = n
				s.N = n
				sources = append(sources, s)
			} else if sources[n-1].Excerpt == "" {
				sources[n-1].Excerpt = s.Excerpt
			}
			local[k] = n
		}
		text := markerRE.ReplaceAllStringFunc(f.Text, func(m string) string {
			k, _ := strconv.Atoi(m[1 : len(m)-1])
			if n, ok := local[k]; ok {
				return "[" + strconv.Itoa(n) + "]"
			}
			return "" // a marker its child's checker kept cannot be here; drop it
		})
		briefs = append(briefs, findingBrief{Question: f.Question, Text: strings.TrimSpace(text)})
	}
	return sources, briefs
}

// compose is the report made from the findings themselves, without the brain (its
// budget is spent, or its answer was unusable): a section per sub-question.
func compose(fs []findingBrief, sources []Source) Draft {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", f.Question, f.Text)
	}
	return Draft{Report: strings.TrimSpace(b.String()), Sources: sources}
}

// objectFrom fills an output schema's top-level fields from the findings when the
// brain gave no object: strings from the findings' text, numbers and booleans left at
// their zero, arrays of strings from the sub-questions' findings. Each field's basis
// cites what its value was drawn from.
func objectFrom(schema json.RawMessage, fs []findingBrief, sources []Source) (json.RawMessage, map[string]Basis) {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	json.Unmarshal(schema, &s)
	obj := map[string]any{}
	basis := map[string]Basis{}
	for i, k := range slices.Sorted(maps.Keys(s.Properties)) {
		var from []findingBrief
		if len(fs) > 0 {
			from = fs[i%len(fs) : i%len(fs)+1]
		}
		var texts []string
		var ns []int
		for _, f := range from {
			texts = append(texts, plain(f.Text))
			for _, m := range markerRE.FindAllStringSubmatch(f.Text, -1) {
				n, _ := strconv.Atoi(m[1])
				ns = append(ns, n)
			}
		}
		switch s.Properties[k].Type {
		case "number", "integer":
			obj[k] = len(fs)
		case "boolean":
			obj[k] = len(fs) > 0
		case "array":
			var all []string
			for _, f := range fs {
				all = append(all, plain(f.Text))
			}
			obj[k] = all
		case "object":
			obj[k] = map[string]any{}
		default:
			obj[k] = strings.Join(texts, " ")
		}
		basis[k] = Basis{Citations: cited(ns, sources), Reasoning: "Drawn from the findings of the research run.", Confidence: "low"}
	}
	b, _ := json.Marshal(obj)
	return b, basis
}

// plain is a text without its [n] markers.
func plain(s string) string {
	return strings.Join(strings.Fields(markerRE.ReplaceAllString(s, "")), " ")
}
