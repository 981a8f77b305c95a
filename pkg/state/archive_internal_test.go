package state

import (
	"strings"
	"testing"
)

// BenchmarkEncodeCold encodes the archived record of a one-search job: a 4 KB
// request, a hop's turn and calls, a 3 KB result in the chain and among the
// recorded searches, an answer and a trace.
func BenchmarkEncodeCold(b *testing.B) {
	result := `{"query":"go news","hits":[` + strings.Repeat(`{"title":"Go 1.26 <b>&</b>","url":"https://go.dev/","snippet":"lorem ipsum dolor sit amet, consectetur"},`, 30) + `{}]}`
	job := map[string]string{"id": "job_1", "tenant": "t0", "kind": "chat", "model": "m", "status": "completed", "created": "1764300000000",
		"updated": "1764300000100", "finished": "1764300000100", "deadline": "1764300060000", "batch": "", "question": "what is new in Go?",
		"request":  `{"v":2,"protocol":"chat","request":{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 340) + `"}]}}`,
		"response": `{"choices":[{"message":{"content":"Go 1.26 is out [1]."}}]}`, "usage": `{"searches":1,"cost_usd":0.01}`,
		"trace": `[{"query":"go news","engine":"brave","result":"addr"}]`}
	chain := map[string]string{"m:0": `{"role":"assistant","tool_calls":[{"id":"c1","name":"web_search"}]}`, "calls:0": `[{"id":"c1","query":"go news"}]`,
		"n:0": "1", "c:0": "1", "r:0:c1": `{"job_id":"job_1","hop":0,"call_id":"c1","result":` + result + `}`, "m:1": `{"role":"assistant","content":"Go 1.26 is out [1]."}`, "searches": "1"}
	searches := map[string]string{"addr": result}
	response := []byte(`{"tenant":"t0","input":[{"role":"user","content":"what is new in Go?"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		encodeCold(job, chain, searches, response)
	}
}
