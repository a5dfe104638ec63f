package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Compression is how the agent compresses what it writes to a store:
// snapshots, and the archive's INCR segments. An AOF base is shipped as the
// server wrote it: an RDB base is compressed by the server already
// (rdbcompression). Readers never need to be told: a compressed snapshot's
// key ends in .zst, and a segment is a zstd frame or RESP.
type Compression string

const (
	CompressionNone Compression = ""
	CompressionZstd Compression = "zstd"
)

// ParseCompression reads --compression: none (or empty) or zstd.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return CompressionNone, nil
	case string(CompressionZstd):
		return CompressionZstd, nil
	}
	return "", fmt.Errorf("compression %q: want none or zstd", s)
}

// zstdMagic begins every zstd frame (RFC 8878). An RDB begins with REDIS or
// VALKEY and a RESP segment with * or #, so a reader tells them apart.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// zstdSuffix ends the key of a compressed snapshot.
const zstdSuffix = ".zst"

// The segment codecs are shared: EncodeAll and DecodeAll are safe for
// concurrent use. The default level (zstd's 3) compresses RESP several
// times over at a few hundred MB/s a core.
var (
	segmentEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	segmentDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(4*maxSegment))
)

// encodeSegment is b as c stores it.
func encodeSegment(b []byte, c Compression) []byte {
	if c != CompressionZstd {
		return b
	}
	return segmentEncoder.EncodeAll(b, make([]byte, 0, len(b)/4))
}

// decodeSegment is what a stored segment holds: b itself, or the content
// of the zstd frame b is.
func decodeSegment(b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, zstdMagic) {
		return b, nil
	}
	out, err := segmentDecoder.DecodeAll(b, nil)
	if err != nil {
		return nil, fmt.Errorf("decompressing a zstd segment: %w", err)
	}
	return out, nil
}

// compressingWriter compresses what is written to it into w, as zstd
// frames; Close writes the last one.
func compressingWriter(w io.Writer) io.WriteCloser {
	enc, _ := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1)) // fails only on a bad option
	return enc
}

// digestWriter hashes and counts what is written through it.
type digestWriter struct {
	w   io.Writer
	sha hash.Hash
	n   int64
}

func (d *digestWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	d.sha.Write(p[:n])
	d.n += int64(n)
	return n, err
}

// getSnapshot downloads the snapshot at key into w, verified against
// wantSHA256 (the stored object's digest), and decompressed when its key
// says it is compressed.
func getSnapshot(ctx context.Context, store *Store, key string, w io.Writer, wantSHA256 string) error {
	if !strings.HasSuffix(key, zstdSuffix) {
		_, err := store.Get(ctx, key, w, wantSHA256)
		return err
	}
	pr, pw := io.Pipe()
	got := make(chan error, 1)
	go func() {
		_, err := store.Get(ctx, key, pw, wantSHA256)
		_ = pw.CloseWithError(err) // nil: EOF
		got <- err
	}()
	dec, err := zstd.NewReader(pr, zstd.WithDecoderConcurrency(1))
	if err == nil {
		_, err = io.Copy(w, dec)
		dec.Close()
	}
	_ = pr.CloseWithError(errors.New("the decompression ended"))
	if getErr := <-got; getErr != nil {
		return getErr // the store's error says more than the decoder's
	}
	if err != nil {
		return fmt.Errorf("decompressing %s: %w", key, err)
	}
	return nil
}
