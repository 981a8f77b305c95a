package simulator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfleet/searchfleet/pkg/llm"
)

// The scripted model as a research run's brain (pkg/research): a chat request whose
// system prompt begins "searchfleet research: <step>" carries the step's material as a
// JSON object in its user message, and is answered with the JSON object the step
// asks for, deterministically:
//
//   - plan: the question decomposed into max_questions sub-questions, one aspect of
//     it each (its background, key facts, latest developments, …). "sim:read=URL" in
//     the question has each child read a page first (URL/<n>, where web_fetch is
//     offered: sim:fetch) and then search (sim:hops=2);
//   - reflect: on the first reflection, max_gaps further sub-questions ("What remains
//     unclear about …"); none after;
//   - write: a report with a section per finding, the finding's text with its [n]
//     markers as given, and with output_schema an object with a value and a basis
//     per top-level property. "sim:bad-claim" in the question adds a claim no source
//     makes, citing source 1, for verification to catch.
//
// Children of a run are ordinary chat requests, answered as every other.
func researchBrain(req chatRequest) (map[string]any, bool) {
	if len(req.Messages) < 2 || req.Messages[0].Role != "system" {
		return nil, false
	}
	sys := llm.Text(req.Messages[0].Content)
	line, _, _ := strings.Cut(sys, "\n")
	step, ok := strings.CutPrefix(line, "searchfleet research: ")
	if !ok {
		return nil, false
	}
	var in struct {
		Question     string            `json:"question"`
		MaxQuestions int               `json:"max_questions"`
		MaxGaps      int               `json:"max_gaps"`
		Findings     []finding         `json:"findings"`
		Sources      []json.RawMessage `json:"sources"`
		OutputSchema json.RawMessage   `json:"output_schema"`
	}
	user := llm.Text(req.Messages[len(req.Messages)-1].Content)
	if i, j := strings.Index(user, "{"), strings.LastIndex(user, "}"); i >= 0 && j > i {
		json.Unmarshal([]byte(user[i:j+1]), &in)
	}
	topic := strings.TrimRight(strings.TrimSpace(in.Question), "?.! ")
	topic = researchDirectiveRE.ReplaceAllString(topic, "")
	topic = strings.TrimSpace(topic)
	var out any
	switch step {
	case "plan":
		var qs []map[string]string
		read := readRE.FindStringSubmatch(in.Question)
		for i := range min(in.MaxQuestions, len(researchAspects)) {
			a := researchAspects[i]
			q := fmt.Sprintf(a[0], topic)
			if read != nil {
				q += fmt.Sprintf(" Read %s/%d first. sim:fetch sim:hops=2", strings.TrimRight(read[1], "/"), i+1)
			}
			qs = append(qs, map[string]string{"question": q, "establish": fmt.Sprintf(a[1], topic)})
		}
		out = map[string]any{"questions": qs}
	case "reflect":
		gaps := []map[string]string{}
		again := slices.ContainsFunc(in.Findings, func(f finding) bool { return strings.HasPrefix(f.Question, "What remains unclear") })
		for i := 0; i < in.MaxGaps && !again; i++ {
			gaps = append(gaps, map[string]string{"question": fmt.Sprintf("What remains unclear about %s (gap %d)?", topic, i+1),
				"establish": "what the first round of findings left open"})
		}
		out = map[string]any{"gaps": gaps}
	case "write":
		var b strings.Builder
		fmt.Fprintf(&b, "# %s\n\n", topic)
		for _, f := range in.Findings {
			fmt.Fprintf(&b, "## %s\n\n%s\n\n", f.Question, f.Text)
		}
		if strings.Contains(in.Question, "sim:bad-claim") && len(in.Sources) > 0 {
			b.WriteString("The moon is made of green cheese [1].\n")
		}
		w := map[string]any{"report": strings.TrimSpace(b.String())}
		if len(in.OutputSchema) > 0 {
			obj, basis := simObject(in.OutputSchema, in.Findings)
			w["object"], w["basis"] = obj, basis
		}
		out = w
	default:
		return nil, false
	}
	content, _ := json.Marshal(out)
	return map[string]any{"role": "assistant", "content": string(content)}, true
}

// finding is a finding of a run as a step's material carries it.
type finding struct {
	Question string `json:"question"`
	Text     string `json:"text"`
}

var (
	researchDirectiveRE = regexp.MustCompile(`\s*sim:[a-z0-9-]+(=\S+)?`)
	simMarkerRE         = regexp.MustCompile(`\[(\d{1,3})\]`)
	readRE              = regexp.MustCompile(`sim:read=(https?://\S+)`)
)

// researchAspects are the aspects the scripted planner decomposes a question into:
// the sub-question and what it must establish, %s the question's topic.
var researchAspects = [][2]string{
	{"What is the background of %s?", "the context of %s"},
	{"What are the key facts about %s?", "the established facts of %s"},
	{"What are the latest developments on %s?", "what changed recently in %s"},
	{"Who are the main actors in %s?", "who is involved in %s"},
	{"What numbers describe %s?", "the figures of %s"},
	{"What are the main criticisms of %s?", "the objections to %s"},
	{"What is the history of %s?", "how %s came about"},
	{"What is the outlook for %s?", "where %s is heading"},
	{"How does %s compare internationally?", "how %s compares elsewhere"},
	{"What are the causes of %s?", "what caused %s"},
	{"What are the effects of %s?", "what %s leads to"},
	{"What do experts say about %s?", "the experts' view of %s"},
	{"What are the costs of %s?", "what %s costs"},
	{"What are the risks of %s?", "the risks of %s"},
	{"What rules govern %s?", "the regulation of %s"},
	{"What are common misconceptions about %s?", "what is often wrong about %s"},
	{"What data covers %s?", "the data sources on %s"},
	{"What questions about %s are open?", "what is unknown about %s"},
	{"What technology is involved in %s?", "the technology of %s"},
	{"What is public opinion on %s?", "how the public sees %s"},
	{"What alternatives to %s exist?", "the alternatives to %s"},
	{"Where is %s most advanced?", "the places that lead in %s"},
	{"What failed attempts at %s are known?", "what did not work in %s"},
	{"What would change %s?", "what could change %s"},
}

// simObject answers an output schema's top-level properties from the findings: a
// string property the text of one finding (markers dropped), a number the count of
// findings, a boolean whether any was found, an array the findings' texts; each with
// a basis citing the markers of what it was drawn from.
func simObject(schema json.RawMessage, findings []finding) (map[string]any, map[string]any) {
	plain := func(t string) string { return strings.Join(strings.Fields(simMarkerRE.ReplaceAllString(t, "")), " ") }
	obj, basis := map[string]any{}, map[string]any{}
	for i, f := range schemaFields(schema) {
		k := f[0]
		cites := []int{}
		text := ""
		if len(findings) > 0 {
			f := findings[i%len(findings)]
			text = plain(f.Text)
			for _, m := range simMarkerRE.FindAllStringSubmatch(f.Text, -1) {
				n, _ := strconv.Atoi(m[1])
				cites = append(cites, n)
			}
		}
		switch f[1] {
		case "number", "integer":
			obj[k] = len(findings)
		case "boolean":
			obj[k] = len(findings) > 0
		case "array":
			all := []string{}
			for _, f := range findings {
				all = append(all, plain(f.Text))
			}
			obj[k] = all
		case "object":
			obj[k] = map[string]any{}
		default:
			obj[k] = text
		}
		basis[k] = map[string]any{"citations": cites, "reasoning": "(simulated) drawn from the findings on " + k, "confidence": "medium"}
	}
	return obj, basis
}
