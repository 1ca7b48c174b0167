package codec

// The tile: tileSide × tileSide waxels, repeated over the image. A keyed permutation assigns each waxel either to
// the pilot (a known ±1 chip sequence used for synchronisation and detection statistics) or to one coded bit
// (a ±1 chip whose sign is flipped by the bit). The permutation spreads the chips of each coded bit over the whole
// tile, so local damage (crops, overlays) becomes scattered errors that the code corrects.
const (
	tileSide    = 128
	tileWaxels  = tileSide * tileSide
	pilotWaxels = tileWaxels / 8 // 12.5% pilot
)

type layout struct {
	pilot  []float32 // ±1 at pilot waxels, 0 elsewhere
	chip   []float32 // ±1 at data waxels, 0 at pilot waxels
	bitOf  []int32   // coded bit carried by each data waxel, -1 for pilot waxels
	pilotN int
	perBit []int32 // number of chips of each coded bit
}

func newLayout(key []byte) *layout {
	ks := newKeystream(key, "tile-layout")
	perm := make([]int32, tileWaxels)
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := tileWaxels - 1; i > 0; i-- {
		j := ks.intn(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	l := &layout{
		pilot:  make([]float32, tileWaxels),
		chip:   make([]float32, tileWaxels),
		bitOf:  make([]int32, tileWaxels),
		pilotN: pilotWaxels,
		perBit: make([]int32, codedBits),
	}
	for k, pos := range perm {
		if k < pilotWaxels {
			l.pilot[pos] = ks.sign()
			l.bitOf[pos] = -1
			continue
		}
		b := int32((k - pilotWaxels) % codedBits)
		l.chip[pos] = ks.sign()
		l.bitOf[pos] = b
		l.perBit[b]++
	}
	return l
}

// tilePattern returns the tile of waxel values for the coded bits (0/1) with per-bit amplitudes amp (nil means 1).
func (l *layout) tilePattern(coded []uint8, amp []float32) []float32 {
	t := make([]float32, tileWaxels)
	for i := range t {
		b := l.bitOf[i]
		if b < 0 {
			t[i] = l.pilot[i]
			continue
		}
		v := l.chip[i]
		if coded[b] == 0 {
			v = -v
		}
		if amp != nil {
			v *= amp[b]
		}
		t[i] = v
	}
	return t
}
