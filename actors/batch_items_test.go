package actors

import (
	"testing"

	"filigrane/actors/jobstate"
)

// TestResultExtOfVideo: a batch archive names a video's result after its container, as the job named its output
// (a MOV source comes back a MOV: clip-watermarked.mov), not after the kind's default (it was .mp4 for both).
func TestResultExtOfVideo(t *testing.T) {
	for _, c := range []struct {
		out  *jobstate.Output
		want string
	}{
		{&jobstate.Output{Filename: "clip-watermarked.mov", ContentType: "video/quicktime"}, "mov"},
		{&jobstate.Output{Filename: "clip-watermarked.mp4", ContentType: "video/mp4"}, "mp4"},
		{nil, "mp4"}, // no output recorded: the kind's default
	} {
		job := &jobstate.Record{Media: jobstate.MediaVideo, Output: c.out}
		if got := resultExt(job); got != c.want {
			t.Errorf("resultExt of %+v = %q, want %q", c.out, got, c.want)
		}
	}
}
