package simulator_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends a model request to the simulator and returns the answer's body.
func post(t *testing.T, url string, header http.Header, body string) []byte {
	t.Helper()
	req, _ := http.NewRequestWithContext(timeout(t), "POST", url, bytes.NewReader([]byte(body)))
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return b
}

// Declared, OpenAI's web_search tool and Gemini's googleSearch get native answers
// grounded on pages generated from the question ("sim:fixture": the recorded ones),
// marked as simulated, their citations moved with the mark: every OpenAI url_citation
// spans its markdown link (code points), every Gemini segment spans its text (UTF-8
// bytes), and the cited text repeats the question.
func TestSimNativeSearchAnswers(t *testing.T) {
	t.Parallel()
	url := startSim(t)
	for _, c := range []struct {
		q                   string
		citations, supports int
		about               string
	}{
		{"Search the web for the latest news about NATS JetStream", 3, 3, "latest news about NATS JetStream, simulated result 1 of 5."},
		{"Search the web for the latest news sim:fixture", 10, 7, ""},
	} {
		simNativeAnswers(t, url, c.q, c.citations, c.supports, c.about)
	}
}

func simNativeAnswers(t *testing.T, url, q string, wantCited, wantSupports int, about string) {
	t.Helper()
	b := post(t, url+"/v1/responses", http.Header{"Authorization": {"Bearer sim-key"}},
		`{"model":"gpt-5","input":"`+q+`","tools":[{"type":"web_search"}],"include":["web_search_call.action.sources"]}`)
	var resp struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text        string `json:"text"`
				Annotations []struct {
					URL        string `json:"url"`
					StartIndex int    `json:"start_index"`
					EndIndex   int    `json:"end_index"`
				} `json:"annotations"`
			} `json:"content"`
		} `json:"output"`
	}
	json.Unmarshal(b, &resp)
	cited := 0
	for _, it := range resp.Output {
		for _, c := range it.Content {
			if !strings.HasPrefix(c.Text, "(simulated answer) ") {
				t.Errorf("text %q is not marked as simulated", c.Text[:40])
			}
			runes := []rune(c.Text)
			for _, a := range c.Annotations {
				cited++
				if span := string(runes[a.StartIndex:a.EndIndex]); !strings.HasPrefix(span, "([") || !strings.Contains(span, "]("+a.URL) {
					t.Errorf("annotation of %s spans %q", a.URL, span)
				}
			}
		}
	}
	if cited != wantCited || !strings.Contains(string(b), about) {
		t.Errorf("%d citations, want %d, about %q: %s", cited, wantCited, about, b)
	}

	b = post(t, url+"/v1beta/models/gemini-2.5-flash:generateContent", http.Header{"X-Goog-Api-Key": {"sim-key"}},
		`{"contents":[{"role":"user","parts":[{"text":"`+q+`"}]}],"tools":[{"googleSearch":{}}]}`)
	var gem struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"content"`
			GroundingMetadata struct {
				GroundingSupports []struct {
					Segment struct {
						StartIndex int    `json:"startIndex"`
						EndIndex   int    `json:"endIndex"`
						Text       string `json:"text"`
					} `json:"segment"`
				} `json:"groundingSupports"`
			} `json:"groundingMetadata"`
		} `json:"candidates"`
	}
	json.Unmarshal(b, &gem)
	if len(gem.Candidates) != 1 || len(gem.Candidates[0].GroundingMetadata.GroundingSupports) != wantSupports || !strings.Contains(string(b), about) {
		t.Fatalf("answer %s", b)
	}
	text := gem.Candidates[0].Content.Parts[0].Text
	if !strings.HasPrefix(text, "(simulated answer) ") {
		t.Errorf("text %q is not marked as simulated", text[:40])
	}
	for _, s := range gem.Candidates[0].GroundingMetadata.GroundingSupports {
		if got := text[s.Segment.StartIndex:s.Segment.EndIndex]; got != s.Segment.Text {
			t.Errorf("segment %d..%d spans %q, not %q", s.Segment.StartIndex, s.Segment.EndIndex, got, s.Segment.Text)
		}
	}
}
