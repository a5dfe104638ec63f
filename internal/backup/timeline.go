package backup

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"time"
)

// Timeline is what one volume's archive holds, as timeline.json records
// it: the AOF bases and INCR files the Archiver shipped from the server on
// that volume, and how far. The Archiver rewrites it after every pass;
// readers trust only what it lists.
type Timeline struct {
	ID string `json:"id"`
	// Bases are the AOF bases shipped, in seq order.
	Bases []ArchivedBase `json:"bases"`
	// Incrs are the INCR files shipped, in seq order.
	Incrs []ArchivedIncr `json:"incrs"`
	// LastArchivedTime is an instant, by the server's clock, before which
	// every write the server executed is archived: the last pass confirmed
	// the server had written them (INFO), then read the open INCR file's
	// tail.
	LastArchivedTime time.Time `json:"lastArchivedTime"`
}

// ArchivedBase is an AOF base, shipped whole.
type ArchivedBase struct {
	Seq  int64  `json:"seq"`
	File string `json:"file"`
	// Time is where the base and the INCR files after it begin to be
	// this server's history, conservatively: the later of the base's own
	// point (an RDB's ctime: its writer, the rewrite's child, started
	// then, so it forked at or before it; a RESP base's first #TS
	// annotation, or else its mtime) and the birth of its first INCR file.
	// A rewrite opens that file just before it forks, so the base's point
	// decides; a base restored from a backup holds an older point than
	// the server's first start on it, where its INCR file begins, and a
	// chain of it must not claim the time between (another timeline has
	// it). The base holds no write acknowledged after Time.
	Time   time.Time `json:"time"`
	SHA256 string    `json:"sha256"`
	Size   int64     `json:"size"`
	// RDB says the base is an RDB (an RDB preamble) rather than RESP.
	RDB bool `json:"rdb"`
	// FirstIncr is the seq of the first INCR file that follows the base:
	// the first the manifest listed with it; 0 until one is seen.
	FirstIncr int64 `json:"firstIncr"`
}

// ArchivedIncr is an INCR file, shipped as contiguous segments (objects
// incr/<seq>/<offset>). The timeline records the digest of all the bytes
// shipped rather than a list of segments, which would grow with every pass:
// a restore lists the segments, and checks them against SHA256.
type ArchivedIncr struct {
	Seq  int64  `json:"seq"`
	File string `json:"file"`
	// Base is the seq of the last base the manifest listed it with.
	Base int64 `json:"base"`
	// Size is the bytes shipped, and SHA256 their digest.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// FirstTS and LastTS are the first and last #TS annotations shipped
	// (unix seconds), 0 when none was.
	FirstTS int64 `json:"firstTS,omitempty"`
	LastTS  int64 `json:"lastTS,omitempty"`
	// Closed says the server moved on to a later INCR file and all of this
	// one is shipped, unless LostTail: the file was gone before its end
	// was read (the agent was down when a rewrite deleted it), and the log
	// ends at ReadAt.
	Closed   bool `json:"closed"`
	LostTail bool `json:"lostTail,omitempty"`
	// ReadAt is the LastArchivedTime of the last pass that read its tail
	// while it was the open INCR file.
	ReadAt time.Time `json:"readAt"`
	// LastSegment is the last segment shipped, which a restarted archiver
	// compares with the file (Archiver.diverged), and DigestState the
	// SHA-256 state after it, to go on hashing; both only while the file
	// is not closed.
	LastSegment *Segment `json:"lastSegment,omitempty"`
	DigestState []byte   `json:"digestState,omitempty"`
}

// Segment is a run of complete entries of an INCR file at Offset.
type Segment struct {
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// archiveDir is where timelines go, under the destination's prefix.
const archiveDir = "archive"

// timelineKey, baseKey and segmentKey are the keys, relative to the
// destination's prefix, of a timeline's record and objects:
//
//	archive/<timeline>/timeline.json
//	archive/<timeline>/base/<seq>/<file>
//	archive/<timeline>/incr/<seq>/<offset>
//
// with the numbers zero-padded, so that keys sort as the log does.
func timelineKey(id string) string { return path.Join(archiveDir, id, "timeline.json") }

func baseKey(id string, seq int64, file string) string {
	return path.Join(archiveDir, id, "base", fmt.Sprintf("%010d", seq), file)
}

func incrDir(id string, seq int64) string {
	return path.Join(archiveDir, id, "incr", fmt.Sprintf("%010d", seq))
}

func segmentKey(id string, seq, offset int64) string {
	return path.Join(incrDir(id, seq), fmt.Sprintf("%020d", offset))
}

func (t *Timeline) base(seq int64) *ArchivedBase {
	for i := range t.Bases {
		if t.Bases[i].Seq == seq {
			return &t.Bases[i]
		}
	}
	return nil
}

func (t *Timeline) incr(seq int64) *ArchivedIncr {
	for i := range t.Incrs {
		if t.Incrs[i].Seq == seq {
			return &t.Incrs[i]
		}
	}
	return nil
}

// add records b, whose scan found complete entries to its end, as the
// next segment of i.
func (i *ArchivedIncr) add(b []byte, scan AOFScan) error {
	h := sha256.New()
	if i.DigestState != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(i.DigestState); err != nil {
			return fmt.Errorf("INCR file %s: the timeline's digest state: %w", i.File, err)
		}
	} else if i.Size != 0 {
		return fmt.Errorf("INCR file %s: the timeline records %d bytes shipped but no digest state to go on from", i.File, i.Size)
	}
	h.Write(b)
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	i.LastSegment = &Segment{Offset: i.Size, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	i.DigestState, i.SHA256 = state, hex.EncodeToString(h.Sum(nil))
	i.Size += int64(len(b))
	if len(scan.Timestamps) > 0 {
		if i.FirstTS == 0 {
			i.FirstTS = scan.Timestamps[0]
		}
		i.LastTS = scan.Timestamps[len(scan.Timestamps)-1]
	}
	return nil
}

// close records that all of i is shipped, or all that will be.
func (i *ArchivedIncr) close(lostTail bool) {
	i.Closed, i.LostTail = true, lostTail
	i.LastSegment, i.DigestState = nil, nil
}

func (t *Timeline) encode() ([]byte, error) { return json.MarshalIndent(t, "", "  ") }

func decodeTimeline(b []byte) (Timeline, error) {
	var t Timeline
	if err := json.Unmarshal(b, &t); err != nil {
		return Timeline{}, fmt.Errorf("timeline.json is no timeline: %w", err)
	}
	return t, nil
}

// rdbCreated is the ctime aux field near the start of an RDB (header the
// file's first bytes): the unix time at which its writer started.
// rdbSaveInfoAuxFields writes it third, after valkey-ver and redis-bits.
func rdbCreated(header []byte) (time.Time, bool) {
	const opcodeAux = 0xfa
	pos := rdbHeaderSize
	for pos < len(header) && header[pos] == opcodeAux {
		key, next, ok := rdbString(header, pos+1)
		if !ok {
			return time.Time{}, false
		}
		value, after, ok := rdbString(header, next)
		if !ok {
			return time.Time{}, false
		}
		if key == "ctime" {
			var secs int64
			if _, err := fmt.Sscan(value, &secs); err != nil {
				return time.Time{}, false
			}
			return time.Unix(secs, 0).UTC(), true
		}
		pos = after
	}
	return time.Time{}, false
}

// rdbString decodes an RDB string at b[pos:] (rdbGenericLoadStringObject):
// a length-prefixed string or an integer encoding; LZF strings are not
// needed for the aux fields it reads, and are reported as not found.
func rdbString(b []byte, pos int) (s string, next int, ok bool) {
	if pos >= len(b) {
		return "", 0, false
	}
	first := b[pos]
	var n int
	switch first >> 6 {
	case 0:
		n, pos = int(first&0x3f), pos+1
	case 1:
		if pos+2 > len(b) {
			return "", 0, false
		}
		n, pos = int(first&0x3f)<<8|int(b[pos+1]), pos+2
	case 2:
		if first != 0x80 || pos+5 > len(b) {
			return "", 0, false
		}
		n, pos = int(binary.BigEndian.Uint32(b[pos+1:])), pos+5
	default:
		var size int
		switch first & 0x3f {
		case 0:
			size = 1
		case 1:
			size = 2
		case 2:
			size = 4
		default:
			return "", 0, false
		}
		if pos+1+size > len(b) {
			return "", 0, false
		}
		v := b[pos+1 : pos+1+size]
		var i int64
		switch size {
		case 1:
			i = int64(int8(v[0]))
		case 2:
			i = int64(int16(binary.LittleEndian.Uint16(v)))
		case 4:
			i = int64(int32(binary.LittleEndian.Uint32(v)))
		}
		return fmt.Sprint(i), pos + 1 + size, true
	}
	if pos+n > len(b) {
		return "", 0, false
	}
	return string(b[pos : pos+n]), pos + n, true
}
