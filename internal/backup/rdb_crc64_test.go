package backup

import (
	"math/rand/v2"
	"testing"
)

// The vectors of src/unit/test_crc64.c; the second includes the C string's
// terminating NUL, as sizeof does there.
func TestCRC64KnownVectors(t *testing.T) {
	lorem := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed " +
		"do eiusmod tempor incididunt ut labore et dolore magna " +
		"aliqua. Ut enim ad minim veniam, quis nostrud exercitation " +
		"ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis " +
		"aute irure dolor in reprehenderit in voluptate velit esse " +
		"cillum dolore eu fugiat nulla pariatur. Excepteur sint " +
		"occaecat cupidatat non proident, sunt in culpa qui officia " +
		"deserunt mollit anim id est laborum.\x00"
	for _, tc := range []struct {
		desc, in string
		want     uint64
	}{
		{"123456789", "123456789", 16845390139448941002},
		{"the lorem ipsum text", lorem, 14373597793578550195},
		{"nothing", "", 0},
	} {
		if got := crc64Jones.update(0, []byte(tc.in)); got != tc.want {
			t.Errorf("%s: CRC64 %d, want %d", tc.desc, got, tc.want)
		}
		if got := crc64BitByBit([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: the bit-by-bit reference gives %d, want %d", tc.desc, got, tc.want)
		}
	}
}

// The eight-bytes-a-step path agrees with the definition at every length
// and alignment, and in any split of the input, as a stream's reads split it.
func TestCRC64SlicingMatchesBitByBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for n := range 100 {
		if got, want := crc64Jones.update(0, data[:n]), crc64BitByBit(data[:n]); got != want {
			t.Fatalf("%d bytes: %x, want %x", n, got, want)
		}
	}
	whole := crc64Jones.update(0, data)
	for range 100 {
		crc, p := uint64(0), data
		for len(p) > 0 {
			n := min(len(p), rng.IntN(40))
			crc = crc64Jones.update(crc, p[:n])
			p = p[n:]
		}
		if crc != whole {
			t.Fatalf("split input: %x, whole: %x", crc, whole)
		}
	}
}

// crc64BitByBit is _crc64(0, p) of src/crc64.c: the register unreflected,
// the input taken least significant bit first, the result reflected.
func crc64BitByBit(p []byte) uint64 {
	var crc uint64
	for _, c := range p {
		for i := uint(0); i < 8; i++ {
			bit := crc&(1<<63) != 0
			if c&(1<<i) != 0 {
				bit = !bit
			}
			crc <<= 1
			if bit {
				crc ^= 0xad93d23594c935a9
			}
		}
	}
	return reflect64(crc)
}

func reflect64(x uint64) uint64 {
	var r uint64
	for range 64 {
		r = r<<1 | x&1
		x >>= 1
	}
	return r
}
