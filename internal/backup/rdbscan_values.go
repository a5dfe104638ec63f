package backup

import (
	"encoding/binary"
	"fmt"
)

// How rdbScan steps over the values it does not keep, and finds the
// number of elements of those it samples, without building them: the
// element counts are in the RDB (a length before the elements) or in the
// header of an encoded blob (a listpack's, an intset's, a ziplist's).

// countedStrings skips a length n and n*per strings, and returns n.
func (p *rdbScan) countedStrings(per uint64) (int64, error) {
	n, err := p.length()
	if err != nil {
		return 0, err
	}
	for range n * per {
		if _, _, err := p.stringValue(-1); err != nil {
			return 0, err
		}
	}
	return int64(n), nil
}

// zset skips a sorted set in the RDB's own encoding: members and scores,
// as text (typeZSet) or 8 bytes (typeZSet2).
func (p *rdbScan) zset(t byte) (int64, error) {
	n, err := p.length()
	if err != nil {
		return 0, err
	}
	for range n {
		if _, _, err := p.stringValue(-1); err != nil {
			return 0, err
		}
		if t == typeZSet2 {
			err = p.skip(8)
		} else {
			err = p.textDouble()
		}
		if err != nil {
			return 0, err
		}
	}
	return int64(n), nil
}

// textDouble skips a double saved by rdbSaveDoubleValue: a length byte,
// or 253, 254, 255 for nan, inf and -inf, with no bytes after.
func (p *rdbScan) textDouble() error {
	b, err := p.r.ReadByte()
	if err != nil || b >= 253 {
		return err
	}
	return p.skip(uint64(b))
}

// blobHeader reads an encoded value (one string) and returns its first n
// bytes, nil when it is shorter or larger than the scanner reads.
func (p *rdbScan) blobHeader(n int) ([]byte, error) {
	b, _, err := p.stringValue(maxBlob)
	if err != nil || len(b) < n {
		return nil, err
	}
	return b[:n], nil
}

// encodedSize reads a value stored as one blob and returns its number of
// elements from the blob's header: an intset's length, a listpack's or a
// ziplist's element count (halved for hashes and sorted sets, which hold
// pairs); -1 when the header does not say (more than 65534 elements, or a
// zipmap).
func (p *rdbScan) encodedSize(t byte) (int64, error) {
	var n int64
	switch t {
	case typeSetIntset:
		h, err := p.blobHeader(8)
		if err != nil || h == nil {
			return -1, err
		}
		return int64(binary.LittleEndian.Uint32(h[4:8])), nil
	case typeListZiplist, typeZSetZiplist, typeHashZiplist:
		h, err := p.blobHeader(10)
		if err != nil {
			return -1, err
		}
		n = headerCount(h, 8)
	case typeHashListpack, typeZSetListpack, typeSetListpack:
		h, err := p.blobHeader(6)
		if err != nil {
			return -1, err
		}
		n = headerCount(h, 4)
	default:
		_, _, err := p.stringValue(-1)
		return -1, err
	}
	if n > 0 && (t == typeZSetZiplist || t == typeHashZiplist || t == typeHashListpack || t == typeZSetListpack) {
		n /= 2
	}
	return n, nil
}

// headerCount is the 16-bit element count at off in h, -1 when h is nil
// or the count is 65535 (too many to count there).
func headerCount(h []byte, off int) int64 {
	if h == nil {
		return -1
	}
	if c := binary.LittleEndian.Uint16(h[off : off+2]); c != 0xffff {
		return int64(c)
	}
	return -1
}

// Quicklist node containers (QUICKLIST_NODE_CONTAINER_*).
const (
	quicklistPlain  = 1
	quicklistPacked = 2
)

// quicklist sums the elements of a list's nodes: ziplists (typeListQuicklist),
// or listpacks and plain elements (typeListQuick2).
func (p *rdbScan) quicklist(t byte) (int64, error) {
	nodes, err := p.length()
	if err != nil {
		return 0, err
	}
	var total int64
	for range nodes {
		container := uint64(quicklistPacked)
		if t == typeListQuick2 {
			if container, err = p.length(); err != nil {
				return 0, err
			}
		}
		if container == quicklistPlain {
			_, _, err = p.stringValue(-1)
			total++
			if err != nil {
				return 0, err
			}
			continue
		}
		off := 4 // a listpack's count
		if t == typeListQuicklist {
			off = 8 // a ziplist's
		}
		h, err := p.blobHeader(off + 2)
		if err != nil {
			return 0, err
		}
		if n := headerCount(h, off); n >= 0 && total >= 0 {
			total += n
		} else {
			total = -1
		}
	}
	return total, nil
}

// stream skips a stream (rdbSaveObject's OBJ_STREAM case) and returns its
// length. typeStream2 added the first and deleted IDs, the entries added
// and each group's entries read; typeStream3 each consumer's active time.
func (p *rdbScan) stream(t byte) (int64, error) {
	nodes, err := p.length()
	if err != nil {
		return 0, err
	}
	if err := p.skipStrings(int(min(nodes, 1<<40)) * 2); err != nil {
		return 0, err
	}
	length, err := p.length()
	if err != nil {
		return 0, err
	}
	ids := 2 // the last ID
	if t != typeStream {
		ids += 5 // the first ID, the maximal deleted ID, entries added
	}
	if err := p.skipLengths(ids); err != nil {
		return 0, err
	}
	groups, err := p.length()
	if err != nil {
		return 0, err
	}
	for range groups {
		if err := p.streamGroup(t); err != nil {
			return 0, err
		}
	}
	return int64(length), nil
}

// streamID is the size of a raw stream ID: two big-endian 64-bit numbers.
const streamID = 16

func (p *rdbScan) streamGroup(t byte) error {
	fields := 2 // the last ID
	if t != typeStream {
		fields++ // entries read
	}
	if err := p.skipStrings(1); err != nil {
		return err
	}
	if err := p.skipLengths(fields); err != nil {
		return err
	}
	pending, err := p.length()
	if err != nil {
		return err
	}
	for range pending {
		// The ID, the delivery time, the delivery count.
		if err := p.skip(streamID + 8); err != nil {
			return err
		}
		if err := p.skipLengths(1); err != nil {
			return err
		}
	}
	consumers, err := p.length()
	if err != nil {
		return err
	}
	times := uint64(8) // seen time
	if t == typeStream3 {
		times += 8 // active time
	}
	for range consumers {
		if err := p.skipStrings(1); err != nil {
			return err
		}
		if err := p.skip(times); err != nil {
			return err
		}
		owned, err := p.length()
		if err != nil {
			return err
		}
		if err := p.skip(owned * streamID); err != nil {
			return err
		}
	}
	return nil
}

// Module value opcodes (RDB_MODULE_OPCODE_*).
const (
	moduleOpEOF = iota
	moduleOpSInt
	moduleOpUInt
	moduleOpFloat
	moduleOpDouble
	moduleOpString
)

// skipModuleValue skips a module's value or aux data: annotated fields up
// to the EOF opcode (RDB_TYPE_MODULE_2).
func (p *rdbScan) skipModuleValue() error {
	for {
		op, err := p.length()
		if err != nil {
			return err
		}
		switch op {
		case moduleOpEOF:
			return nil
		case moduleOpSInt, moduleOpUInt:
			err = p.skipLengths(1)
		case moduleOpFloat:
			err = p.skip(4)
		case moduleOpDouble:
			err = p.skip(8)
		case moduleOpString:
			err = p.skipStrings(1)
		default:
			err = fmt.Errorf("unknown module opcode %d", op)
		}
		if err != nil {
			return err
		}
	}
}
