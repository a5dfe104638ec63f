package backup

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// VerifyRDB reads an RDB from r and checks it as the server will when it
// loads it: the magic and version at the start, the EOF opcode and the
// CRC-64 at the end. It returns the RDB's size and SHA-256 (lowercase hex),
// to compare with the Snapshot recorded when it was taken. A restore calls
// it before it starts a server on the file.
//
// An RDB saved with rdbchecksum no ends with a checksum of 0, which the
// server loads without a check, and so does VerifyRDB: then only the
// SHA-256 tells a damaged file from a good one.
func VerifyRDB(r io.Reader) (size int64, sha string, err error) {
	v := newRDBVerifier()
	if _, err := io.Copy(v, r); err != nil {
		if v.err != nil {
			return v.size, "", v.err
		}
		return v.size, "", fmt.Errorf("reading the RDB: %w", err)
	}
	if err := v.finish(); err != nil {
		return v.size, "", err
	}
	return v.size, v.sum(), nil
}

const (
	rdbHeaderSize  = 9 // "REDIS0011" or "VALKEY080"
	rdbTrailerSize = 8 // the CRC-64, little endian
	rdbOpcodeEOF   = 0xff
	// rdbFirstChecksummedVersion is the first RDB version that ends with a
	// CRC-64; an older one could not be verified.
	rdbFirstChecksummedVersion = 5
	// rdbForeignVersionMin and rdbForeignVersionMax bound the versions of
	// Redis's non-open-source formats, which Valkey refuses (src/rdb.h).
	rdbForeignVersionMin = 12
	rdbForeignVersionMax = 79
)

// rdbVerifier is an io.Writer that checks the RDB written through it. The
// header is checked as soon as it is complete, so a stream that is not an
// RDB fails at its first write; the end can only be checked by finish. The
// last 8 bytes written are held back from the CRC until more arrive, since
// any 8 might be the trailer.
type rdbVerifier struct {
	sha    hash.Hash
	size   int64
	header [rdbHeaderSize]byte

	crc        uint64
	lastSummed byte // the last byte in crc: the EOF opcode once the stream ends
	held       [rdbTrailerSize]byte
	heldLen    int
	err        error // a bad header: every later write fails with it too
}

func newRDBVerifier() *rdbVerifier {
	return &rdbVerifier{sha: sha256.New()}
}

func (v *rdbVerifier) Write(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.size < rdbHeaderSize {
		n := copy(v.header[v.size:], p)
		if v.size+int64(n) == rdbHeaderSize {
			if v.err = checkRDBHeader(v.header[:]); v.err != nil {
				return 0, v.err
			}
		}
	}
	v.sha.Write(p)
	v.size += int64(len(p))
	v.sumAllButLast8(p)
	return len(p), nil
}

// sumAllButLast8 adds to the CRC what p pushes out of the held-back bytes.
func (v *rdbVerifier) sumAllButLast8(p []byte) {
	leaving := v.heldLen + len(p) - rdbTrailerSize
	if leaving <= 0 {
		v.heldLen += copy(v.held[v.heldLen:], p)
		return
	}
	fromHeld := min(leaving, v.heldLen)
	fromP := leaving - fromHeld
	v.crc = crc64Jones.update(v.crc, v.held[:fromHeld])
	v.crc = crc64Jones.update(v.crc, p[:fromP])
	if fromP > 0 {
		v.lastSummed = p[fromP-1]
	} else {
		v.lastSummed = v.held[fromHeld-1]
	}
	kept := copy(v.held[:], v.held[fromHeld:v.heldLen])
	copy(v.held[kept:], p[fromP:])
	v.heldLen = rdbTrailerSize
}

// finish checks the end of the RDB once all of it has been written.
func (v *rdbVerifier) finish() error {
	if v.err != nil {
		return v.err
	}
	if v.size < rdbHeaderSize+1+rdbTrailerSize {
		return fmt.Errorf("the RDB is truncated: %d bytes, fewer than a header, an EOF opcode and a checksum", v.size)
	}
	if v.lastSummed != rdbOpcodeEOF {
		return fmt.Errorf("the RDB is truncated or corrupt: its last 9 bytes are not the EOF opcode and a checksum (%d bytes read)", v.size)
	}
	stored := binary.LittleEndian.Uint64(v.held[:])
	if stored != 0 && stored != v.crc {
		return fmt.Errorf("the RDB is corrupt: its trailer says CRC-64 %016x, its %d bytes sum to %016x", stored, v.size, v.crc)
	}
	return nil
}

func (v *rdbVerifier) sum() string { return hex.EncodeToString(v.sha.Sum(nil)) }

// checkRDBHeader accepts what rdbLoadRioWithLoadingCtx of Valkey 8.1.1
// accepts, "REDIS0" or "VALKEY" then the version in digits, from the first
// version that has a checksum.
func checkRDBHeader(h []byte) error {
	magic, digits := string(h[:6]), string(h[6:rdbHeaderSize])
	if magic != "REDIS0" && magic != "VALKEY" {
		return fmt.Errorf("not an RDB: it starts with %q, not REDIS or VALKEY and a version", h)
	}
	version, err := strconv.ParseUint(digits, 10, 16)
	if err != nil {
		return fmt.Errorf("not an RDB: its version %q is not a number", digits)
	}
	switch {
	case version < rdbFirstChecksummedVersion:
		return fmt.Errorf("RDB version %d has no checksum to verify (version %d and later have)", version, rdbFirstChecksummedVersion)
	case magic == "REDIS0" && version >= rdbForeignVersionMin && version <= rdbForeignVersionMax:
		return fmt.Errorf("RDB version %d is a Redis format that Valkey cannot load", version)
	}
	return nil
}
