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

// TestFormatOfVideoOutput: a watermarked video's asset record names the container it was written in, which is
// not always the input's (an MP4 with PCM audio comes back a MOV); it named the input's.
func TestFormatOfVideoOutput(t *testing.T) {
	for _, c := range []struct{ ct, input, want string }{
		{"video/quicktime", "MP4", "MOV"},
		{"video/mp4", "MP4", "MP4"},
		{"video/quicktime", "MOV", "MOV"},
		{"application/pdf", "PDF", "PDF"},
	} {
		if got := formatOfContentType(c.ct, c.input); got != c.want {
			t.Errorf("format of a %s output of a %s input = %q, want %q", c.ct, c.input, got, c.want)
		}
	}
}
