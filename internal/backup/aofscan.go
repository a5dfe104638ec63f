package backup

import (
	"bytes"
	"fmt"
	"strconv"
)

// annotationLineMax is the longest annotation line the server's loader and
// valkey-check-aof read whole (AOF_ANNOTATION_LINE_MAX_LEN in server.h).
const annotationLineMax = 1024

// AOFScan is what ScanAOF found in the bytes of an INCR file.
type AOFScan struct {
	// End is the offset, relative to the bytes scanned, just past the last
	// complete entry: a RESP command or an annotation line.
	End int
	// Timestamps are the #TS:<unix seconds> annotations among the complete
	// entries, in the order they came.
	Timestamps []int64
	// Cut is the offset of the first #TS annotation later than the scan's
	// target (see ScanAOF), -1 when there is none.
	Cut int
}

// ScanAOF reads the entries of an INCR file in b, which starts at an
// entry's boundary, and stops where they stop: at a zero byte where an
// entry would start (the preallocated zeros ahead of the server's log, see
// aof_prealloc.c), or at an entry that b holds only part of (the server is
// writing it, or b ends there). The size of the file is not the log's end:
// the open INCR file is preallocated, and in durable mode its last writes
// are padded with annotation lines, which are entries like any other.
//
// Cut is what valkey-check-aof --truncate-to-timestamp <target> cuts at
// (processAnnotations): the first #TS annotation whose second is after
// target, so that the commands of second target are kept; target < 0 finds
// no cut.
//
// Bytes that are neither an entry nor zeros are an error: the file is no
// AOF, or it is corrupt at End.
func ScanAOF(b []byte, target int64) (AOFScan, error) {
	scan := AOFScan{Cut: -1}
	for scan.End < len(b) {
		var n int
		var err error
		switch rest := b[scan.End:]; rest[0] {
		case 0:
			return scan, nil
		case '#':
			var ts int64
			var isTS bool
			n, ts, isTS, err = annotation(rest)
			if n > 0 && isTS {
				scan.Timestamps = append(scan.Timestamps, ts)
				if target >= 0 && ts > target && scan.Cut < 0 {
					scan.Cut = scan.End
				}
			}
		case '*':
			n, err = command(rest)
		default:
			err = fmt.Errorf("byte %q where a command (*) or an annotation (#) starts", rest[0])
		}
		if err != nil {
			return scan, fmt.Errorf("the AOF is malformed at offset %d: %w", scan.End, err)
		}
		if n == 0 {
			return scan, nil
		}
		scan.End += n
	}
	return scan, nil
}

// annotation is the length of the annotation line at the start of b, 0 if
// b holds only part of it, and its timestamp if it is #TS:<seconds>.
func annotation(b []byte) (n int, ts int64, isTS bool, err error) {
	window := b[:min(len(b), annotationLineMax)]
	i := bytes.IndexByte(window, '\n')
	if z := bytes.IndexByte(window, 0); z >= 0 && (i < 0 || z < i) {
		return 0, 0, false, nil // the server is writing it
	}
	if i < 0 {
		if len(b) >= annotationLineMax {
			return 0, 0, false, fmt.Errorf("an annotation longer than %d bytes", annotationLineMax)
		}
		return 0, 0, false, nil
	}
	line := b[:i+1]
	if i == 0 || line[i-1] != '\r' {
		return 0, 0, false, fmt.Errorf("an annotation line that does not end in CRLF: %.40q", line)
	}
	if digits, ok := bytes.CutPrefix(line[:i-1], []byte("#TS:")); ok {
		ts, err := strconv.ParseInt(string(digits), 10, 64)
		if err != nil {
			return 0, 0, false, fmt.Errorf("invalid timestamp annotation %q", line)
		}
		return len(line), ts, true, nil
	}
	return len(line), 0, false, nil
}

// command is the length of the RESP array of bulk strings at the start of
// b (*<n>\r\n, then n times $<len>\r\n<bytes>\r\n), 0 if b holds only part
// of it.
func command(b []byte) (int, error) {
	args, pos, err := respLength(b, 0, '*')
	if err != nil || pos == 0 {
		return 0, err
	}
	if args < 1 {
		return 0, fmt.Errorf("a command of %d arguments", args)
	}
	for range args {
		size, next, err := respLength(b, pos, '$')
		if err != nil || next == 0 {
			return 0, err
		}
		end := next + int(size) + 2
		if end > len(b) {
			return 0, nil
		}
		if b[end-2] == 0 || b[end-1] == 0 {
			return 0, nil // the server is writing it
		}
		if b[end-2] != '\r' || b[end-1] != '\n' {
			return 0, fmt.Errorf("a bulk string of %d bytes at offset %d is not followed by CRLF", size, next)
		}
		pos = end
	}
	return pos, nil
}

// respLength reads "<kind><decimal>\r\n" at b[pos:] and returns the
// decimal and the offset after the line, or next 0 if b ends first. A zero
// byte in a line, or where a bulk string's CRLF belongs, is the part of a
// write the server has not made yet (zeros lie ahead of its log), so an
// incomplete entry rather than a malformed one.
func respLength(b []byte, pos int, kind byte) (value int64, next int, err error) {
	window := b[pos:min(len(b), pos+32)]
	i := bytes.IndexByte(window, '\n')
	if z := bytes.IndexByte(window, 0); z >= 0 && (i < 0 || z < i) {
		return 0, 0, nil // the server is writing it
	}
	if i < 0 {
		if len(b)-pos >= 32 {
			return 0, 0, fmt.Errorf("no %q length line at offset %d", kind, pos)
		}
		return 0, 0, nil
	}
	line := b[pos : pos+i+1]
	if line[0] != kind || i < 2 || line[i-1] != '\r' {
		return 0, 0, fmt.Errorf("%.32q at offset %d is no %q length line", line, pos, kind)
	}
	value, err = strconv.ParseInt(string(line[1:i-1]), 10, 64)
	if err != nil || value < 0 || value > 1<<40 {
		return 0, 0, fmt.Errorf("%.32q at offset %d is no %q length line", line, pos, kind)
	}
	return value, pos + i + 1, nil
}
