package backup

import "encoding/binary"

// crc64Jones is the checksum that ends an RDB: the CRC-64 of src/crc64.c
// (polynomial 0xad93d23594c935a9, "Jones"), reflected, initial value 0, no
// final XOR. Go's hash/crc64 always inverts the register before and after,
// so it cannot compute this one directly. The tables are the reflected
// polynomial's, eight of them to take eight bytes a step (slicing-by-8, as
// src/crcspeed.c does): an RDB is checked at the speed it arrives.
var crc64Jones = makeCRC64Tables(0x95ac9329ac4bc9b5) // 0xad93d23594c935a9 bit-reversed

type crc64Tables [8][256]uint64

func makeCRC64Tables(reflectedPoly uint64) *crc64Tables {
	t := new(crc64Tables)
	for i := range 256 {
		crc := uint64(i)
		for range 8 {
			if crc&1 == 1 {
				crc = crc>>1 ^ reflectedPoly
			} else {
				crc >>= 1
			}
		}
		t[0][i] = crc
	}
	for i := range 256 {
		crc := t[0][i]
		for k := 1; k < 8; k++ {
			crc = t[0][byte(crc)] ^ crc>>8
			t[k][i] = crc
		}
	}
	return t
}

// update continues crc over p: update(update(0, a), b) == update(0, a+b).
func (t *crc64Tables) update(crc uint64, p []byte) uint64 {
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][byte(crc)] ^ t[6][byte(crc>>8)] ^ t[5][byte(crc>>16)] ^ t[4][byte(crc>>24)] ^
			t[3][byte(crc>>32)] ^ t[2][byte(crc>>40)] ^ t[1][byte(crc>>48)] ^ t[0][byte(crc>>56)]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}
