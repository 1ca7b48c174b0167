package actors

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadCatalogOverridesByName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plans.json")
	os.WriteFile(path, []byte(`{
		"plans": [{"name": "growth", "concurrency": 4, "requests_per_minute": 500, "formats": ["image"]},
		          {"name": "studio", "concurrency": 3, "requests_per_minute": 50, "gpu": true, "formats": ["image"], "job_retry_after": "3s"}],
		"prices": {"detect": 2}
	}`), 0o600)
	c, err := LoadCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := c.Plan("growth")
	if g.Concurrency != 4 || g.RequestsPerMinute != 500 || g.HasFormat("video") || time.Duration(g.JobRetryAfter) != 2*time.Second {
		t.Fatalf("growth = %+v", g)
	}
	if s, ok := c.Plan("studio"); !ok || !s.GPU || time.Duration(s.JobRetryAfter) != 3*time.Second {
		t.Fatalf("studio = %+v", s)
	}
	if _, ok := c.Plan("trial"); !ok {
		t.Fatal("defaults not named in the file were dropped")
	}
	if c.Prices.Detect != 2 || c.Prices.ImageEmbed != 1 || c.Prices.GPUHoldMultiplier != 3 || c.Prices.VideoFramesPerMinute != 3600 {
		t.Fatalf("prices = %+v", c.Prices)
	}
	for _, bad := range []string{`{"plans":[{"name":"x","concurrency":0,"requests_per_minute":1}]}`, `{"plans":`, `{"plans":[{"name":"x","concurrency":1,"requests_per_minute":1,"job_retry_after":"soon"}]}`,
		`{"prices":{"video_frames_per_minute":0}}`, `{"prices":{"video_frames_per_minute":-60}}`} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := LoadCatalog(path); err == nil {
			t.Fatalf("accepted %s", bad)
		}
	}
}
