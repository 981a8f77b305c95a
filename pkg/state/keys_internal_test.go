package state

import "testing"

// A job's keys share its slot ({id}) and keep their names: a rename would strand the
// keys of every job running through an upgrade.
func TestJobKeys(t *testing.T) {
	t.Parallel()
	k := NewKeys("sf")
	for got, want := range map[string]string{
		k.Job("j1"):                     "sf:{j1}:job",
		k.Lease("j1", 3):                "sf:{j1}:lease:3",
		k.searchLease("j1", 2, "c"):     "sf:{j1}:sl:2:c",
		k.WebhookSecret("j1"):           "sf:{j1}:whsec",
		k.StoredResponse("j1"):          "sf:{j1}:response",
		k.webhookDeferrals("j1", "m-1"): "sf:{j1}:whdefer:m-1",
	} {
		if got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}

// BenchmarkJobKey is the job record's key, built on every step of a job.
func BenchmarkJobKey(b *testing.B) {
	k := NewKeys("searchfleet")
	b.ReportAllocs()
	for b.Loop() {
		_ = k.Job("0194f8e3-7c2a-7b1e-9d4f-1a2b3c4d5e6f")
	}
}
