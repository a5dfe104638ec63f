package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
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
