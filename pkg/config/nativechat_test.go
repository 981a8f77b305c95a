package config_test

import (
	"strings"
	"testing"

	"github.com/searchfleet/searchfleet/pkg/config"
)

// OpenAI-Chat providers of kind kimi/moonshot and glm/zhipu search natively (their
// own $web_search and web_search tools); other OpenAI-Chat kinds cannot, and the
// error says which do.
func TestNativeSearchOpenAIChatKinds(t *testing.T) {
	t.Parallel()
	f, err := config.ParseFile([]byte(`{"providers":{
		"moonshot":{"kind":"moonshot","baseURL":"https://api.moonshot.cn/v1"},
		"kimi":{"kind":"kimi","baseURL":"https://api.moonshot.cn/v1"},
		"zhipu":{"kind":"zhipu","baseURL":"https://open.bigmodel.cn/api/paas/v4"},
		"glm":{"kind":"glm","protocol":"openai-chat","baseURL":"https://open.bigmodel.cn/api/paas/v4"},
		"or":{"kind":"openrouter","baseURL":"https://openrouter.ai/api/v1"}},
		"models":{"k1":{"provider":"moonshot","model":"kimi-k2.5","webSearch":"native"},"k2":{"provider":"kimi","model":"kimi-k2.5","webSearch":"auto"},
		"g1":{"provider":"zhipu","model":"glm-4.7","webSearch":"native"},"g2":{"provider":"glm","model":"glm-4.7","webSearch":"auto"},
		"k3":{"provider":"kimi","model":"kimi-k2.5"},"o":{"provider":"or","model":"x","webSearch":"auto"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"k1": true, "k2": true, "g1": true, "g2": true, "k3": false, "o": false} {
		if got := f.NativeSearch(name); got != want {
			t.Errorf("NativeSearch(%s) = %v, want %v", name, got, want)
		}
	}
	_, err = config.ParseFile([]byte(`{"providers":{"or":{"kind":"openrouter","baseURL":"http://x"}},"models":{"m":{"provider":"or","model":"x","webSearch":"native"}}}`))
	if err == nil || !strings.Contains(err.Error(), `kind "openrouter"`) || !strings.Contains(err.Error(), "kimi, moonshot, glm or zhipu") {
		t.Errorf("error %v", err)
	}
}
