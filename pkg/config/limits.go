package config

import (
	"maps"
	"slices"
)

// Limits are what one tenant may use at once. The process defaults come from the
// environment (FLEET_TENANT_*, Env.TenantLimits); a tenant of the config file may set
// its own ("limits" in the tenant's entry), where an omitted or 0 field takes the
// default and a negative one means no limit. With no tenants configured the open API
// is one tenant, "default", with the defaults.
//
// The defaults protect a small deployment (one ingress, a handful of workers): a key
// holder cannot hold more than a few dozen connections open, queue more jobs than the
// workers clear in minutes, or fill the disk.
type Limits struct {
	// RequestsPerSecond is the steady request rate, shared by every ingress replica
	// (a GCRA limiter in Redis); Burst is how many requests may come at once.
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty" env:"RPS" envDefault:"20"`
	Burst             int     `json:"burst,omitempty" env:"BURST" envDefault:"40"`
	// SyncWaits bounds synchronous requests waiting for their answer at once (each
	// may wait up to the job timeout); Streams bounds open server-sent event streams
	// (streamed answers and /events).
	SyncWaits int `json:"syncWaits,omitempty" env:"SYNC_WAITS" envDefault:"64"`
	Streams   int `json:"streams,omitempty" env:"STREAMS" envDefault:"64"`
	// QueuedJobs bounds the tenant's jobs submitted through the API that have not
	// ended (batch lines count against Batches instead).
	QueuedJobs int `json:"queuedJobs,omitempty" env:"QUEUED_JOBS" envDefault:"512"`
	// Batches bounds the tenant's batches that have not ended.
	Batches int `json:"batches,omitempty" env:"BATCHES" envDefault:"8"`
	// Files and FileBytes bound the tenant's stored files (uploads, batch inputs,
	// outputs and error files) by count and by size.
	Files     int   `json:"files,omitempty" env:"FILES" envDefault:"1000"`
	FileBytes int64 `json:"fileBytes,omitempty" env:"FILE_BYTES" envDefault:"2147483648"`
	// StorageBytes bounds the bytes of the tenant's job records the fleet keeps for
	// the retention period (requests, answers, traces, the chain and recorded search
	// results of each job, batch lines included; stored Responses objects are job
	// records). A new job is reserved its request plus an allowance when it is
	// submitted and charged its real size when it ends; a record's bytes are given
	// back when it expires or is deleted. Over it, submissions are refused (429; 413
	// for one request larger than the whole quota). Default 256 MiB.
	StorageBytes int64 `json:"storageBytes,omitempty" env:"STORAGE_BYTES" envDefault:"268435456"`
	// Weight is the tenant's weight in the fair shares of worker slots (default 1): a
	// tenant waiting for a chat step or a search holds at most slots × weight / W of a
	// process's slots, W the weights of the tenants running or waiting there, and the
	// next free slot goes to the tenant furthest below its share.
	Weight int `json:"weight,omitempty" env:"WEIGHT" envDefault:"1"`
	// MaxSteps caps the chat steps one chat worker process runs for the tenant at once
	// (new jobs and resumes each); MaxSearches the searches of one engine one search
	// worker process runs for it at once. 0: its share only.
	MaxSteps    int `json:"maxSteps,omitempty" env:"MAX_STEPS"`
	MaxSearches int `json:"maxSearches,omitempty" env:"MAX_SEARCHES"`
}

// Or returns l with every zero field taken from def; a negative field (no limit)
// becomes 0, which the enforcing code reads as "no limit".
func (l Limits) Or(def Limits) Limits {
	return Limits{
		RequestsPerSecond: or(l.RequestsPerSecond, def.RequestsPerSecond),
		Burst:             or(l.Burst, def.Burst),
		SyncWaits:         or(l.SyncWaits, def.SyncWaits),
		Streams:           or(l.Streams, def.Streams),
		QueuedJobs:        or(l.QueuedJobs, def.QueuedJobs),
		Batches:           or(l.Batches, def.Batches),
		Files:             or(l.Files, def.Files),
		FileBytes:         or(l.FileBytes, def.FileBytes),
		StorageBytes:      or(l.StorageBytes, def.StorageBytes),
		Weight:            or(l.Weight, def.Weight),
		MaxSteps:          or(l.MaxSteps, def.MaxSteps),
		MaxSearches:       or(l.MaxSearches, def.MaxSearches),
	}
}

// or is one field of Limits.Or: v, else (zero) d, or 0 when v is negative.
func or[T int | int64 | float64](v, d T) T {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return d
	}
	return v
}

// validate checks the process defaults (negative values make no sense there: 0 is
// "no limit").
func (l Limits) validate(bad func(string, ...any)) {
	if l.RequestsPerSecond < 0 || l.Burst < 0 || l.SyncWaits < 0 || l.Streams < 0 || l.QueuedJobs < 0 ||
		l.Batches < 0 || l.Files < 0 || l.FileBytes < 0 || l.StorageBytes < 0 || l.Weight < 0 || l.MaxSteps < 0 || l.MaxSearches < 0 {
		bad("FLEET_TENANT_* limits must not be negative (0: no limit)")
	}
	if l.RequestsPerSecond > 0 && l.Burst < 1 {
		bad("FLEET_TENANT_BURST must be at least 1 when FLEET_TENANT_RPS is set")
	}
}

// TenantLimits gives each tenant its limits: its own over the process defaults.
type TenantLimits struct {
	def Limits
	own map[string]Limits
}

// NewTenantLimits returns the limits of tenants, with def for any other tenant (the
// open API's "default" among them).
func NewTenantLimits(def Limits, tenants []Tenant) *TenantLimits {
	t := &TenantLimits{def: def, own: map[string]Limits{}}
	for _, tc := range tenants {
		t.own[tc.ID] = tc.Limits.Or(def)
	}
	return t
}

// Of returns tenant's limits (0 in a field: no limit). A nil TenantLimits limits
// nothing.
func (t *TenantLimits) Of(tenant string) Limits {
	if t == nil {
		return Limits{}
	}
	if l, ok := t.own[tenant]; ok {
		return l
	}
	return t.def
}

// StorageTotal is what the tenants' storage quotas add up to (the default counted
// once more, for the open API or a tenant the file does not list); unbounded is true
// when a tenant has no quota.
func (t *TenantLimits) StorageTotal() (total int64, unbounded bool) {
	if t == nil {
		return 0, true
	}
	for _, l := range append(slices.Collect(maps.Values(t.own)), t.def) {
		if l.StorageBytes <= 0 {
			return 0, true
		}
		total += l.StorageBytes
	}
	return total, false
}

// Tenants returns every tenant with limits of its own (the default's are Of's for
// any other).
func (t *TenantLimits) Tenants() []string {
	if t == nil {
		return nil
	}
	return slices.Collect(maps.Keys(t.own))
}

// UnlimitedTenantEnv is the environment (KEY=value) that lifts every per-tenant
// default: for load tests and benchmarks, which measure the fleet, not its limits.
func UnlimitedTenantEnv() []string {
	return []string{"FLEET_TENANT_RPS=0", "FLEET_TENANT_SYNC_WAITS=0", "FLEET_TENANT_STREAMS=0", "FLEET_TENANT_QUEUED_JOBS=0",
		"FLEET_TENANT_BATCHES=0", "FLEET_TENANT_FILES=0", "FLEET_TENANT_FILE_BYTES=0", "FLEET_TENANT_STORAGE_BYTES=0"}
}
