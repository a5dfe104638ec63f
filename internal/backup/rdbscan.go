package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
)

// Keyspace is what a backup's RDB holds, read from the RDB itself as the
// agent streams it to the store: every key counted by database, and a
// random sample of keys with what a restored server must say about each.
// A verification (spec.backup.verify) restores the backup into a temporary
// server and compares. The counts are the snapshot's, at its point: the
// server's fork wrote them, so no write made after the point is in them.
type Keyspace struct {
	// DBs are the databases that hold keys, in the RDB's order.
	DBs []DBKeys `json:"dbs"`
	// Sample is at most the sampleKeys asked for, chosen uniformly
	// (reservoir sampling) among the keys whose name is at most
	// SampledKeyMaxLen bytes.
	Sample []SampledKey `json:"sample,omitempty"`
}

// DBKeys counts one database's keys.
type DBKeys struct {
	DB int `json:"db"`
	// Keys is every key of the database, Expires those with a TTL.
	Keys    int64 `json:"keys"`
	Expires int64 `json:"expires"`
}

// SampledKey is one key of the sample.
type SampledKey struct {
	DB  int    `json:"db"`
	Key []byte `json:"key"`
	// Type is what TYPE answers: string, list, set, zset, hash, stream, or
	// module for a module's type.
	Type string `json:"type"`
	// ExpiresAt is the key's expiry in Unix milliseconds (PEXPIRETIME), 0
	// for none.
	ExpiresAt int64 `json:"expiresAt,omitempty"`
	// Size is STRLEN for a string and the number of elements (LLEN, SCARD,
	// ZCARD, HLEN, XLEN) otherwise; -1 where the RDB does not say cheaply.
	Size int64 `json:"size"`
	// SHA256 is the digest of a string's value up to SampledValueMaxLen
	// bytes; empty for other types and longer strings.
	SHA256 string `json:"sha256,omitempty"`
}

// Keys is the number of keys of every database.
func (k *Keyspace) Keys() int64 {
	var n int64
	for _, db := range k.DBs {
		n += db.Keys
	}
	return n
}

const (
	// MaxSampleKeys bounds spec.backup.verify.sampleKeys: the sample goes
	// into backup.json.
	MaxSampleKeys = 1000
	// SampledKeyMaxLen is the longest key name that can be sampled.
	SampledKeyMaxLen = 256
	// SampledValueMaxLen is the longest string value whose digest is kept.
	SampledValueMaxLen = 1 << 20
	// maxBlob bounds what the scanner reads into memory to find the size of
	// an encoded value (a listpack, an intset, a ziplist); a larger one
	// gets size -1.
	maxBlob = 64 << 20
)

// keyScanner is an io.Writer that reads the keys of the RDB written
// through it, in a goroutine of its own behind a pipe. It never fails a
// write: an RDB it cannot read (a module's aux data it does not know) is
// still a backup, only one without a Keyspace, and the reason says why.
type keyScanner struct {
	pw   *io.PipeWriter
	done chan struct{}
	ks   *Keyspace
	err  error
}

func newKeyScanner(sampleKeys int) *keyScanner {
	pr, pw := io.Pipe()
	s := &keyScanner{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		p := &rdbScan{r: bufio.NewReaderSize(pr, 64<<10), want: min(sampleKeys, MaxSampleKeys), ks: &Keyspace{DBs: []DBKeys{}},
			rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
		s.err = p.run()
		s.ks = p.ks
		// Whatever is left (the checksum, or all of an RDB it could not
		// read) is drained so that writes never block.
		_, _ = io.Copy(io.Discard, pr)
	}()
	return s
}

func (s *keyScanner) Write(p []byte) (int, error) {
	_, _ = s.pw.Write(p)
	return len(p), nil
}

// result ends the stream and returns what was read: the Keyspace, or why
// there is none.
func (s *keyScanner) result() (*Keyspace, error) {
	_ = s.pw.Close()
	<-s.done
	if s.err != nil {
		return nil, s.err
	}
	return s.ks, nil
}

// The RDB's opcodes and value types (src/rdb.h of Valkey 8.1.1).
const (
	opFunction2  = 245
	opModuleAux  = 247
	opIdle       = 248
	opFreq       = 249
	opAux        = 250
	opResizeDB   = 251
	opExpireMS   = 252
	opExpireSecs = 253
	opSelectDB   = 254
	opEOF        = 255

	typeString        = 0
	typeList          = 1
	typeSet           = 2
	typeZSet          = 3
	typeHash          = 4
	typeZSet2         = 5
	typeModule2       = 7
	typeHashZipmap    = 9
	typeListZiplist   = 10
	typeSetIntset     = 11
	typeZSetZiplist   = 12
	typeHashZiplist   = 13
	typeListQuicklist = 14
	typeStream        = 15
	typeHashListpack  = 16
	typeZSetListpack  = 17
	typeListQuick2    = 18
	typeStream2       = 19
	typeSetListpack   = 20
	typeStream3       = 21
)

// rdbScan walks an RDB's entries.
type rdbScan struct {
	r    *bufio.Reader
	want int
	rng  *rand.Rand
	ks   *Keyspace
	// eligible counts the keys that could be sampled so far.
	eligible int64
	db       *DBKeys
}

func (p *rdbScan) run() error {
	header := make([]byte, rdbHeaderSize)
	if _, err := io.ReadFull(p.r, header); err != nil {
		return err
	}
	if err := checkRDBHeader(header); err != nil {
		return err
	}
	p.selectDB(0)
	var expiresAt int64
	for {
		op, err := p.r.ReadByte()
		if err != nil {
			return err
		}
		switch op {
		case opEOF:
			p.dropEmpty()
			return nil
		case opSelectDB:
			n, err := p.length()
			if err != nil {
				return err
			}
			p.selectDB(int(n))
		case opResizeDB:
			err = p.skipLengths(2)
		case opExpireMS:
			expiresAt, err = p.uint64LE()
		case opExpireSecs:
			var secs uint32
			secs, err = p.uint32LE()
			expiresAt = int64(secs) * 1000
		case opIdle:
			err = p.skipLengths(1)
		case opFreq:
			_, err = p.r.ReadByte()
		case opAux:
			err = p.skipStrings(2)
		case opFunction2:
			err = p.skipStrings(1)
		case opModuleAux:
			if err = p.skipLengths(3); err == nil {
				err = p.skipModuleValue()
			}
		default:
			err = p.entry(op, expiresAt)
			expiresAt = 0
		}
		if err != nil {
			return err
		}
	}
}

func (p *rdbScan) selectDB(n int) {
	p.dropEmpty()
	p.ks.DBs = append(p.ks.DBs, DBKeys{DB: n})
	p.db = &p.ks.DBs[len(p.ks.DBs)-1]
}

// dropEmpty removes the current database when it holds no key.
func (p *rdbScan) dropEmpty() {
	if p.db != nil && p.db.Keys == 0 {
		p.ks.DBs = p.ks.DBs[:len(p.ks.DBs)-1]
		p.db = nil
	}
}

// entry reads one key of type t and its value, and samples it.
func (p *rdbScan) entry(t byte, expiresAt int64) error {
	name, nameLen, err := p.stringValue(SampledKeyMaxLen)
	if err != nil {
		return err
	}
	p.db.Keys++
	if expiresAt != 0 {
		p.db.Expires++
	}
	slot := -1
	if nameLen <= SampledKeyMaxLen && p.want > 0 {
		p.eligible++
		if len(p.ks.Sample) < p.want {
			p.ks.Sample = append(p.ks.Sample, SampledKey{})
			slot = len(p.ks.Sample) - 1
		} else if j := p.rng.Int64N(p.eligible); j < int64(p.want) {
			slot = int(j)
		}
	}
	k := SampledKey{DB: p.db.DB, Key: name, ExpiresAt: expiresAt}
	if k.Type, k.Size, k.SHA256, err = p.value(t, slot >= 0); err != nil {
		return fmt.Errorf("the value of key %q: %w", name, err)
	}
	if slot >= 0 {
		p.ks.Sample[slot] = k
	}
	return nil
}

// value reads a value of type t. With sampled it also returns its size
// and, for a string, the digest; without, only the type.
func (p *rdbScan) value(t byte, sampled bool) (typ string, size int64, sha string, err error) {
	switch t {
	case typeString:
		limit := int64(-1)
		if sampled {
			limit = SampledValueMaxLen
		}
		v, n, err := p.stringValue(limit)
		if err == nil && v != nil {
			sum := sha256.Sum256(v)
			sha = hex.EncodeToString(sum[:])
		}
		return "string", n, sha, err
	case typeList, typeSet:
		size, err = p.countedStrings(1)
		return typeName(t), size, "", err
	case typeHash:
		size, err = p.countedStrings(2)
		return "hash", size, "", err
	case typeZSet, typeZSet2:
		size, err = p.zset(t)
		return "zset", size, "", err
	case typeModule2:
		if err := p.skipLengths(1); err != nil {
			return "", 0, "", err
		}
		return "module", -1, "", p.skipModuleValue()
	case typeHashZipmap, typeListZiplist, typeSetIntset, typeZSetZiplist, typeHashZiplist, typeHashListpack, typeZSetListpack, typeSetListpack:
		size, err = p.encodedSize(t)
		return typeName(t), size, "", err
	case typeListQuicklist, typeListQuick2:
		size, err = p.quicklist(t)
		return "list", size, "", err
	case typeStream, typeStream2, typeStream3:
		size, err = p.stream(t)
		return "stream", size, "", err
	}
	return "", 0, "", fmt.Errorf("RDB value type %d is not one Valkey 8.1 writes", t)
}

func typeName(t byte) string {
	switch t {
	case typeList, typeListZiplist:
		return "list"
	case typeSet, typeSetIntset, typeSetListpack:
		return "set"
	case typeZSetZiplist, typeZSetListpack:
		return "zset"
	}
	return "hash"
}

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
