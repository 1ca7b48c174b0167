package codec

import (
	"crypto/hmac"
	"crypto/sha256"
)

// Entry points for media adapters that cannot change pixels themselves (PDF): they draw the codec's tile as an
// overlay at the geometry the detector expects, and protect structural copies of the id with a keyed MAC.

// TileSide is the side of the repeated tile in waxels. A page pattern drawn with waxels of shortSide/512 (so that
// four tiles span the short side) is found by Detect at the nominal geometry at any rendering resolution.
const TileSide = tileSide

// OverlayWaxelsPerShortSide is how many waxels span the short side of an image at the nominal geometry of images
// with a short side of 1024 pixels or more, and of images downscaled from them.
const OverlayWaxelsPerShortSide = 512

// OverlayTile returns the content-independent waxel values of the tile for id: TileSide×TileSide values, row by
// row, ±1 chips (pilot and data) with uniform amplitude. Waxel (i, j) covers [i·ws, (i+1)·ws) × [j·ws, (j+1)·ws)
// of the image, counting from its top-left corner, and the tile repeats with period TileSide·ws.
func (c *Codec) OverlayTile(id ID) []float32 {
	return c.layout.tilePattern(convEncode(frameBits(id)), nil)
}

// MAC returns HMAC-SHA256 under the deployment key of domain and msg (the domain separates uses), so that a
// structural copy of an id can be verified without exposing the key.
func (c *Codec) MAC(domain string, msg []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte("filigrane/mac/v1/"))
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write(msg)
	return h.Sum(nil)
}

// DetectLumaSoft is DetectLuma that also returns the frame's soft output for CombineFrames, in one analysis.
func (c *Codec) DetectLumaSoft(p LumaPlane) (Detection, FrameSoft) {
	if p.check() != nil {
		return emptyDetection(), FrameSoft{}
	}
	at := c.detectAttempt(p.toPlane())
	var fs FrameSoft
	if at.valid {
		fs = FrameSoft{Coded: append([]float64(nil), at.coded...), PilotZ: at.pilotZ}
	}
	return at.detection(), fs
}

// AnalyzeLumaAt is AnalyzeLuma under one synchronisation hypothesis only: square waxels of waxel pixels anchored
// at the top-left corner (the geometry an overlay drawn at a known scale presents), with the pilot search for
// orientation and offset and the refinement, but no other geometry and no choice among decodes. Adapters that
// must bound how many words they check per file use it for the units they do not decode on their own: the soft
// output is chosen by the pilot alone, so summing it into CombineFrames adds no search over decoded words.
func (c *Codec) AnalyzeLumaAt(p LumaPlane, waxel float64) FrameSoft {
	if p.check() != nil || min(p.Width, p.Height) < minDetectSide || !(waxel >= minWaxel) {
		return FrameSoft{}
	}
	pyr := buildPyramid(p.toPlane(), 16)
	at := c.tryGeometry(cpuSampler{c: c, pyr: pyr}, scaledAffine(waxel))
	if !at.valid {
		return FrameSoft{}
	}
	return FrameSoft{Coded: at.coded, PilotZ: at.pilotZ}
}
