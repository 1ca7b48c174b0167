package video

import (
	"bytes"
	"errors"
	"regexp"
	"testing"
)

const probeMOV = `{"streams":[{"index":0,"codec_name":"h264","codec_type":"video","profile":"High","width":640,
"height":480,"pix_fmt":"yuv420p","r_frame_rate":"30000/1001","avg_frame_rate":"30000/1001","time_base":"1/30000",
"start_time":"0.000000","duration":"3.003000","nb_frames":"90","disposition":{"attached_pic":0},
"side_data_list":[{"side_data_type":"Display Matrix","rotation":90}]},
{"index":1,"codec_name":"aac","codec_type":"audio","tags":{"language":"fra"}}],
"format":{"format_name":"mov,mp4,m4a,3gp,3g2,mj2","duration":"3.003000","size":"123456",
"tags":{"major_brand":"qt  "}}}`

func TestParseProbe(t *testing.T) {
	t.Parallel()
	info, err := ParseProbe([]byte(probeMOV))
	if err != nil {
		t.Fatal(err)
	}
	v := info.Video
	if info.Container != "mov" || v.Width != 640 || v.Height != 480 || v.Frames != 90 || v.Rotation != 90 ||
		v.BitDepth != 8 || v.FrameRate != (Rational{30000, 1001}) || v.VFR() || info.Audio != 1 {
		t.Errorf("parsed %+v", info)
	}
	for _, c := range []struct {
		json string
		want error
	}{
		{`{}`, ErrNotVideo},
		{`not json`, ErrNotVideo},
		{`{"streams":[{"codec_type":"video","width":10,"height":10}],"format":{"format_name":"png_pipe"}}`, ErrNotVideo},
		{`{"streams":[{"codec_type":"audio"}],"format":{"format_name":"mov,mp4"}}`, ErrNoVideoStream},
		{`{"streams":[{"codec_type":"video","disposition":{"attached_pic":1},"width":10,"height":10}],
			"format":{"format_name":"mov,mp4"}}`, ErrNoVideoStream},
		{`{"streams":[{"codec_type":"video"}],"format":{"format_name":"mov,mp4"}}`, ErrTruncated},
	} {
		if _, err := ParseProbe([]byte(c.json)); !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.json, err, c.want)
		}
	}
}

// FuzzParseProbe feeds arbitrary bytes as ffprobe output: ParseProbe must not panic, must return a kind for every
// failure, and an accepted file must have positive dimensions and no negative counts.
func FuzzParseProbe(f *testing.F) {
	f.Add([]byte(probeMOV))
	f.Add([]byte(`{"streams":[{"codec_type":"video","width":1,"height":1,"r_frame_rate":"0/0","nb_frames":"-5"}],
		"format":{"format_name":"matroska,webm","duration":"nan"}}`))
	f.Add([]byte(`{"streams":[{"codec_type":"video","width":99999999,"height":99999999,"avg_frame_rate":"1000000/1"}],
		"format":{"format_name":"mov","duration":"1e300"}}`))
	f.Add([]byte(`{"streams":[{"codec_type":"video","width":64,"height":64,"pix_fmt":"yuv420p10le","side_data_list":[
		{"side_data_type":"Mastering display metadata","red_x":"34000/50000","red_y":"16000/50000","green_x":"13250/50000",
		"green_y":"34500/50000","blue_x":"7500/50000","blue_y":"3000/50000","white_point_x":"15635/50000",
		"white_point_y":"16450/50000","min_luminance":"50/10000","max_luminance":"10000000/10000"},
		{"side_data_type":"Content light level metadata","max_content":1000,"max_average":400}]}],
		"format":{"format_name":"mov","duration":"1"}}`))
	x264Values := regexp.MustCompile(`^(G\(\d+,\d+\)B\(\d+,\d+\)R\(\d+,\d+\)WP\(\d+,\d+\)L\(\d+,\d+\))?$`)
	cllValues := regexp.MustCompile(`^(\d+,\d+)?$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ParseProbe(data)
		if err != nil {
			for _, k := range []error{ErrNotVideo, ErrNoVideoStream, ErrTruncated, ErrUnsupported} {
				if errors.Is(err, k) {
					return
				}
			}
			t.Fatalf("untyped error %v", err)
		}
		v := info.Video
		if v.Width <= 0 || v.Height <= 0 || v.Frames < 0 || info.Duration < 0 || info.Audio < 0 {
			t.Fatalf("accepted %+v", info)
		}
		// The HDR values go into ffmpeg's arguments: numbers in x264's syntax only.
		if !x264Values.MatchString(v.MasteringDisplay) || !cllValues.MatchString(v.ContentLight) {
			t.Fatalf("HDR metadata %q %q", v.MasteringDisplay, v.ContentLight)
		}
		_ = DefaultLimits.Check(info)
	})
}

// TestParseProbeHDRMetadata: the container's mastering display and content light level side data come out in
// x264's option syntax (chromaticity in 0.00002, luminance in 0.0001 cd/m²).
func TestParseProbeHDRMetadata(t *testing.T) {
	t.Parallel()
	info, err := ParseProbe([]byte(`{"streams":[{"codec_type":"video","width":64,"height":64,"pix_fmt":"yuv420p10le",
		"side_data_list":[{"side_data_type":"Mastering display metadata","red_x":"34000/50000","red_y":"16000/50000",
		"green_x":"13250/50000","green_y":"34500/50000","blue_x":"7500/50000","blue_y":"3000/50000",
		"white_point_x":"15635/50000","white_point_y":"16450/50000","min_luminance":"1/200",
		"max_luminance":"1000/1"},{"side_data_type":"Content light level metadata","max_content":1000,
		"max_average":400}]}],"format":{"format_name":"mov","duration":"1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	v := info.Video
	if v.MasteringDisplay != "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,50)" ||
		v.ContentLight != "1000,400" {
		t.Fatalf("mastering display %q, content light %q", v.MasteringDisplay, v.ContentLight)
	}
}

// FuzzDeclareRawTrack: rewriting a track list never panics and never changes its length, whatever the bytes.
func FuzzDeclareRawTrack(f *testing.F) {
	// A track list as ffmpeg 5.1 writes it for 10-bit raw video in VFW mode (sizes shortened).
	entry := []byte{0x86, 0x8F}
	entry = append(entry, "V_MS/VFW/FOURCC"...)
	entry = append(entry, 0xE0, 0x88, 0x2E, 0xB5, 0x24, 0x84, 0, 0, 0, 0)
	entry = append(entry, 0x63, 0xA2, 0x84, 1, 2, 3, 4)
	tracks := append([]byte{0xAE, 0x80 | byte(len(entry))}, entry...)
	f.Add(tracks)
	f.Add([]byte{0xAE, 0xFF, 0x86})
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b)
		err := declareRawTrack(b, "Y3\x0b\x0a")
		if len(b) != n {
			t.Fatal("length changed")
		}
		if err == nil && bytes.Contains(b, []byte("V_MS/VFW")) && bytes.Equal(b, tracks) {
			t.Fatal("VFW track left as it was")
		}
	})
}

// TestDeclareRawTrack: the VFW track becomes native uncompressed video with the pixel format's FourCC, at the same
// size, the header replaced by a Void element.
func TestDeclareRawTrack(t *testing.T) {
	t.Parallel()
	entry := []byte{0x86, 0x8F}
	entry = append(entry, "V_MS/VFW/FOURCC"...)
	entry = append(entry, 0xE0, 0x88, 0x2E, 0xB5, 0x24, 0x84, 0, 0, 0, 0)
	entry = append(entry, 0x63, 0xA2, 0x84, 1, 2, 3, 4)
	tracks := append([]byte{0xAE, 0x80 | byte(len(entry))}, entry...)
	if err := declareRawTrack(tracks, "Y3\x0b\x0a"); err != nil {
		t.Fatal(err)
	}
	want := []byte{0xAE, 0x80 | byte(len(entry)), 0x86, 0x8F}
	want = append(want, "V_UNCOMPRESSED\x00"...)
	want = append(want, 0xE0, 0x88, 0x2E, 0xB5, 0x24, 0x84, 'Y', '3', 0x0b, 0x0a)
	want = append(want, 0xEC, 0x85, 0, 0, 0, 0, 0)
	if !bytes.Equal(tracks, want) {
		t.Fatalf("rewritten\n% x\nwant\n% x", tracks, want)
	}
	if err := declareRawTrack(tracks, "Y3\x0b\x0a"); err != nil {
		t.Fatalf("a native track is refused: %v", err)
	}
}
