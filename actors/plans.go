package actors

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"filigrane/actors/mediakind"
)

// Plan is what an organization pays for: its limits, its formats and whether it may use a GPU.
type Plan struct {
	Name string `json:"name"`
	// Concurrency is the number of jobs that may be active at once; plans with two or more keep one for direct
	// (non-batch) requests.
	Concurrency int `json:"concurrency"`
	// RequestsPerMinute limits every API request of the organization, whatever the key.
	RequestsPerMinute int  `json:"requests_per_minute"`
	GPU               bool `json:"gpu"`
	// Formats the plan may process: image, document, video.
	Formats []string `json:"formats"`
	// IncludedCredits are granted when an organization is created on this plan.
	IncludedCredits int64 `json:"included_credits"`
	// TrialDays > 0 marks a trial plan; file retention is 30 days instead of a year.
	TrialDays int `json:"trial_days,omitempty"`
	// JobRetryAfter is the Retry-After sent with job status responses.
	JobRetryAfter Duration `json:"job_retry_after"`
}

// HasFormat reports whether the plan may process media of kind format.
func (p Plan) HasFormat(format string) bool {
	for _, f := range p.Formats {
		if f == format {
			return true
		}
	}
	return false
}

// Prices are credit costs per unit of work; the media-kind table's price rules apply them.
type Prices = mediakind.Rates

// Catalog is the set of plans and prices of a deployment.
type Catalog struct {
	Plans  []Plan `json:"plans"`
	Prices Prices `json:"prices"`
}

// Plan returns the named plan.
func (c Catalog) Plan(name string) (Plan, bool) {
	for _, p := range c.Plans {
		if p.Name == name {
			return p, true
		}
	}
	return Plan{}, false
}

// Duration is a time.Duration written as a Go duration string ("6s") in configuration files.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"6s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// DefaultCatalog returns the plans and prices of DESIGN.md section 5. Enterprise limits are "custom" there;
// the defaults below are a starting point that operators override in the configuration file.
func DefaultCatalog() Catalog {
	all := []string{"image", "document", "video"}
	slow := Duration(6 * time.Second)
	fast := Duration(2 * time.Second)
	return Catalog{
		Plans: []Plan{
			{Name: "trial", Concurrency: 1, RequestsPerMinute: 20, Formats: all, IncludedCredits: 100, TrialDays: 7, JobRetryAfter: slow},
			{Name: "launch", Concurrency: 1, RequestsPerMinute: 20, Formats: all, JobRetryAfter: slow},
			{Name: "growth", Concurrency: 2, RequestsPerMinute: 100, Formats: all, JobRetryAfter: fast},
			{Name: "scale", Concurrency: 5, RequestsPerMinute: 300, Formats: all, JobRetryAfter: fast},
			{Name: "business", Concurrency: 16, RequestsPerMinute: 1000, GPU: true, Formats: all, JobRetryAfter: fast},
			{Name: "enterprise", Concurrency: 64, RequestsPerMinute: 6000, GPU: true, Formats: all, JobRetryAfter: fast},
		},
		Prices: Prices{ImageEmbed: 1, DocumentEmbed: 1, VideoEmbedPerMinute: 1,
			VideoFramesPerMinute: mediakind.DefaultVideoFramesPerMinute, Detect: 1, GPUHoldMultiplier: 3},
	}
}

// LoadCatalog reads a catalog from a JSON file. Plans named in the file replace the default plan of the same
// name; other defaults stay. Prices given in the file replace the defaults field by field.
func LoadCatalog(path string) (Catalog, error) {
	cat := DefaultCatalog()
	if path == "" {
		return cat, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Catalog{}, fmt.Errorf("read plan catalog: %w", err)
	}
	var file struct {
		Plans  []Plan          `json:"plans"`
		Prices json.RawMessage `json:"prices"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		return Catalog{}, fmt.Errorf("parse plan catalog %s: %w", path, err)
	}
	for _, p := range file.Plans {
		if p.Name == "" || p.Concurrency < 1 || p.RequestsPerMinute < 1 {
			return Catalog{}, fmt.Errorf("plan catalog %s: plan %q needs a name, concurrency >= 1 and requests_per_minute >= 1", path, p.Name)
		}
		if p.JobRetryAfter == 0 {
			p.JobRetryAfter = Duration(2 * time.Second)
		}
		replaced := false
		for i := range cat.Plans {
			if cat.Plans[i].Name == p.Name {
				cat.Plans[i], replaced = p, true
			}
		}
		if !replaced {
			cat.Plans = append(cat.Plans, p)
		}
	}
	if len(file.Prices) > 0 {
		if err := json.Unmarshal(file.Prices, &cat.Prices); err != nil {
			return Catalog{}, fmt.Errorf("parse prices in %s: %w", path, err)
		}
		if cat.Prices.VideoFramesPerMinute < 1 {
			return Catalog{}, fmt.Errorf("prices in %s: video_frames_per_minute %d must be at least 1", path, cat.Prices.VideoFramesPerMinute)
		}
	}
	return cat, nil
}
