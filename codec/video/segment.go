package video

// Segment is one unit of a video: the frames of one SegmentSeconds-long span counted from the first frame. The
// embed report lists them (the receipt's units) and detection reports one result per segment, both cut by the
// same timeline, so unit i of an embed and of a detection of its output name the same frames.
type Segment struct {
	Index int `json:"index"`
	// StartTime is the segment's first frame time in seconds on the video's presentation timeline; EndTime is
	// where the next segment starts, or the last frame's end for the last segment.
	StartTime float64 `json:"start_time"`
	EndTime   float64 `json:"end_time"`
	Frames    int     `json:"frames"`
}

// timeline cuts a stream of frame times into segments. Segments are numbered by position (spec: units[i].index ==
// i): a second without frames (a gap in variable-rate timing) gets no segment.
type timeline struct {
	frames  int
	firstMS int64
	lastMS  int64 // time of the latest frame
	frameMS int64 // interval between the latest two frames (the last frame's duration, as far as known)
	second  int64 // current segment's second from the first frame (-1: none yet)
	cur     Segment
	segs    []Segment
}

func newTimeline() *timeline { return &timeline{second: -1} }

// add places a frame at ms (milliseconds, from the decoder). It reports whether the frame starts a new segment
// after a finished one, which is then the last of segs; the frame itself counts toward the new segment.
func (t *timeline) add(ms int64) (closed bool) {
	if t.frames == 0 {
		t.firstMS = ms
	} else if d := ms - t.lastMS; d > 0 {
		t.frameMS = d
	}
	sec := max((ms-t.firstMS)/(1000*SegmentSeconds), 0)
	if t.second >= 0 && sec != t.second && t.cur.Frames > 0 {
		t.close(ms)
		closed = true
	}
	if t.cur.Frames == 0 {
		t.cur = Segment{Index: len(t.segs), StartTime: seconds(ms)}
	}
	t.second, t.lastMS = sec, ms
	t.cur.Frames++
	t.frames++
	return closed
}

// finish closes the last segment at the last frame's end; it reports whether there was one to close.
func (t *timeline) finish() bool {
	if t.cur.Frames == 0 {
		return false
	}
	t.close(t.lastMS + t.frameMS)
	return true
}

func (t *timeline) close(endMS int64) {
	t.cur.EndTime = max(seconds(endMS), t.cur.StartTime)
	t.segs = append(t.segs, t.cur)
	t.cur = Segment{}
}

// seconds converts a frame time in milliseconds to the units' seconds (a negative time, before the stream's
// start, counts as 0).
func seconds(ms int64) float64 { return float64(max(ms, 0)) / 1000 }
