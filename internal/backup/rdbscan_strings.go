package backup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// How rdbScan reads the RDB's lengths and strings (rdbLoadLenByRef,
// rdbGenericLoadStringObject): a string is kept only when it is short
// enough to be wanted, else stepped over without a copy.

// lengthOrEncoding reads a length (rdbLoadLenByRef): encoded is true for
// the special string encodings, whose kind n then is.
func (p *rdbScan) lengthOrEncoding() (n uint64, encoded bool, err error) {
	b, err := p.r.ReadByte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case 0:
		return uint64(b & 0x3f), false, nil
	case 1:
		next, err := p.r.ReadByte()
		return uint64(b&0x3f)<<8 | uint64(next), false, err
	case 3:
		return uint64(b & 0x3f), true, nil
	}
	switch b {
	case 0x80:
		var v [4]byte
		_, err = io.ReadFull(p.r, v[:])
		return uint64(binary.BigEndian.Uint32(v[:])), false, err
	case 0x81:
		var v [8]byte
		_, err = io.ReadFull(p.r, v[:])
		return binary.BigEndian.Uint64(v[:]), false, err
	}
	return 0, false, fmt.Errorf("unknown length encoding 0x%02x", b)
}

// length reads a length that cannot be a string encoding.
func (p *rdbScan) length() (uint64, error) {
	n, encoded, err := p.lengthOrEncoding()
	if err == nil && encoded {
		err = errors.New("a string encoding where a length belongs")
	}
	return n, err
}

func (p *rdbScan) skipLengths(n int) error {
	for range n {
		if _, err := p.length(); err != nil {
			return err
		}
	}
	return nil
}

func (p *rdbScan) skipStrings(n int) error {
	for range n {
		if _, _, err := p.stringValue(-1); err != nil {
			return err
		}
	}
	return nil
}

func (p *rdbScan) skip(n uint64) error {
	if n > 1<<40 {
		return fmt.Errorf("a length of %d bytes", n)
	}
	_, err := p.r.Discard(int(n))
	return err
}

func (p *rdbScan) uint64LE() (int64, error) {
	var v [8]byte
	_, err := io.ReadFull(p.r, v[:])
	return int64(binary.LittleEndian.Uint64(v[:])), err
}

func (p *rdbScan) uint32LE() (uint32, error) {
	var v [4]byte
	_, err := io.ReadFull(p.r, v[:])
	return binary.LittleEndian.Uint32(v[:]), err
}

// stringValue reads a string (rdbGenericLoadStringObject) and returns its
// length as the server holds it and, when that is at most keep, its
// bytes; a negative keep keeps nothing.
func (p *rdbScan) stringValue(keep int64) ([]byte, int64, error) {
	n, encoded, err := p.lengthOrEncoding()
	if err != nil {
		return nil, 0, err
	}
	if !encoded {
		if int64(n) > keep || n > 1<<40 {
			return nil, int64(n), p.skip(n)
		}
		b := make([]byte, n)
		_, err := io.ReadFull(p.r, b)
		return b, int64(n), err
	}
	var v int64
	switch n {
	case 0:
		var b byte
		b, err = p.r.ReadByte()
		v = int64(int8(b))
	case 1:
		var b [2]byte
		_, err = io.ReadFull(p.r, b[:])
		v = int64(int16(binary.LittleEndian.Uint16(b[:])))
	case 2:
		var b [4]byte
		_, err = io.ReadFull(p.r, b[:])
		v = int64(int32(binary.LittleEndian.Uint32(b[:])))
	case 3:
		return p.lzfString(keep)
	default:
		return nil, 0, fmt.Errorf("unknown string encoding %d", n)
	}
	s := []byte(strconv.FormatInt(v, 10))
	if int64(len(s)) > keep {
		return nil, int64(len(s)), err
	}
	return s, int64(len(s)), err
}

// lzfString reads an LZF-compressed string.
func (p *rdbScan) lzfString(keep int64) ([]byte, int64, error) {
	clen, err := p.length()
	if err != nil {
		return nil, 0, err
	}
	n, err := p.length()
	if err != nil {
		return nil, 0, err
	}
	if int64(n) > keep || clen > maxBlob {
		return nil, int64(n), p.skip(clen)
	}
	in := make([]byte, clen)
	if _, err := io.ReadFull(p.r, in); err != nil {
		return nil, 0, err
	}
	out, err := lzfDecompress(in, int(n))
	return out, int64(n), err
}

// lzfDecompress is liblzf's lzf_decompress: the first want bytes of in's
// output (all of it when want is its length).
func lzfDecompress(in []byte, want int) ([]byte, error) {
	out := make([]byte, 0, want)
	for i := 0; i < len(in) && len(out) < want; {
		ctrl := int(in[i])
		i++
		if ctrl < 32 {
			run := ctrl + 1
			if i+run > len(in) {
				return nil, errors.New("LZF: a literal run past the input")
			}
			out = append(out, in[i:i+run]...)
			i += run
			continue
		}
		length := ctrl >> 5
		if length == 7 {
			if i >= len(in) {
				return nil, errors.New("LZF: truncated")
			}
			length += int(in[i])
			i++
		}
		if i >= len(in) {
			return nil, errors.New("LZF: truncated")
		}
		ref := len(out) - (ctrl&0x1f)<<8 - int(in[i]) - 1
		i++
		if ref < 0 {
			return nil, errors.New("LZF: a reference before the output")
		}
		for k := range length + 2 {
			out = append(out, out[ref+k])
		}
	}
	if len(out) < want {
		return nil, fmt.Errorf("LZF: %d bytes decompressed, want %d", len(out), want)
	}
	return out[:want], nil
}
