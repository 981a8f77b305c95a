package state

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestNewClientKinds(t *testing.T) {
	for _, tc := range []struct {
		url     string
		cluster bool
		addrs   []string
	}{
		{"redis://127.0.0.1:6379/0", false, nil},
		{"redis://:secret@127.0.0.1:6379/2", false, nil},
		{"redis+cluster://127.0.0.1:7000", true, []string{"127.0.0.1:7000"}},
		{"redis+cluster://127.0.0.1:7000,127.0.0.1:7001/", true, []string{"127.0.0.1:7000", "127.0.0.1:7001"}},
		{"redis://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", true, []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}},
		{"redis://u:p@127.0.0.1:7000?addr=127.0.0.1:7001", true, []string{"127.0.0.1:7000", "127.0.0.1:7001"}},
	} {
		c, err := NewClient(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		cc, isCluster := c.(*redis.ClusterClient)
		if isCluster != tc.cluster {
			t.Errorf("%s: cluster client %v, want %v", tc.url, isCluster, tc.cluster)
		}
		if isCluster {
			got := cc.Options().Addrs
			if len(got) != len(tc.addrs) {
				t.Errorf("%s: addrs %v, want %v", tc.url, got, tc.addrs)
			} else {
				for i := range got {
					if got[i] != tc.addrs[i] {
						t.Errorf("%s: addrs %v, want %v", tc.url, got, tc.addrs)
					}
				}
			}
		}
		c.Close()
	}
	if _, err := NewClient("redis+cluster://127.0.0.1:7000/3"); err == nil {
		t.Error("a cluster URL with a database number must be refused")
	}
}
