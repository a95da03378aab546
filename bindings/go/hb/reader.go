package hb

import "hb.dev/hb/internal/capi"

// ---- Reader (STABLE section of hb.h) --------------------------------------

// Ways to hash categorical values into [0, NumRows).
const (
	ReaderHashMod = 0 // id = v mod NumRows
	ReaderHashMix = 1 // id = splitmix64(v) mod NumRows
)

// ReaderConfig mirrors hb_reader_config. Start from DefaultReaderConfig.
type ReaderConfig struct {
	BatchSize    int64
	Columns      string // one letter per column: L, I, C, S; "": Criteo
	Separator    byte
	LogDense     bool
	DenseMissing float32
	NumRows      int64 // > 0: ids hashed into [0, NumRows)
	Hash         int32 // ReaderHash*
	SkipBadLines bool
	MaxLineBytes int64
	Threads      int32
	QueueDepth   int32
	ChunkBytes   int64
	Epochs       int32 // 0: endless
	Shuffle      bool
	Seed         uint64
	DropLast     bool
	ShardIndex   int32 // with NumShards > 0: an explicit shard
	NumShards    int32
}

// DefaultReaderConfig is HB_READER_CONFIG_INIT.
func DefaultReaderConfig() ReaderConfig {
	c := capi.NewReader_config()
	defer capi.DeleteReader_config(c)
	return ReaderConfig{BatchSize: c.GetBatch_size(), Separator: byte(c.GetSeparator()),
		DenseMissing: c.GetDense_missing(), Hash: c.GetHash(), MaxLineBytes: c.GetMax_line_bytes(),
		Threads: c.GetNum_threads(), QueueDepth: c.GetQueue_depth(), ChunkBytes: c.GetChunk_bytes(),
		Epochs: c.GetNum_epochs(), ShardIndex: c.GetShard_index(), NumShards: c.GetNum_shards()}
}

// Reader reads Criteo-format files (paths and glob patterns, plain or
// gzip), sharded over a context's ranks and parsed ahead on background
// threads.
type Reader struct{ handle }

// ReaderBatch is one batch of Size samples in the embedding collection's
// layout: Labels[Size], Dense[Size*NumDense] row-major, and for feature f,
// sample i the ids IDs[Offsets[f*Size+i]:Offsets[f*Size+i+1]] (none for an
// empty field, else one). Copied out of C.
type ReaderBatch struct {
	Size, NumDense, NumSparse, Epoch int
	Labels, Dense                    []float32
	Offsets, IDs                     []int64
}

// NewReader opens the files; c may be nil (read everything, or set
// ShardIndex/NumShards).
func NewReader(c *Context, paths []string, config ReaderConfig) (*Reader, error) {
	n := capi.NewReader_config()
	defer capi.DeleteReader_config(n)
	n.SetBatch_size(config.BatchSize)
	if config.Columns != "" {
		n.SetColumns(config.Columns)
	}
	n.SetSeparator(int32(config.Separator))
	n.SetLog_dense(boolInt(config.LogDense))
	n.SetDense_missing(config.DenseMissing)
	n.SetNum_rows(config.NumRows)
	n.SetHash(config.Hash)
	n.SetSkip_bad_lines(boolInt(config.SkipBadLines))
	n.SetMax_line_bytes(config.MaxLineBytes)
	n.SetNum_threads(config.Threads)
	n.SetQueue_depth(config.QueueDepth)
	n.SetChunk_bytes(config.ChunkBytes)
	n.SetNum_epochs(config.Epochs)
	n.SetShuffle(boolInt(config.Shuffle))
	n.SetSeed(config.Seed)
	n.SetDrop_last(boolInt(config.DropLast))
	n.SetShard_index(config.ShardIndex)
	n.SetNum_shards(config.NumShards)
	list := capi.NewStringList(paths)
	defer list.Free()
	var ctx uintptr
	if c != nil {
		ctx = c.raw()
	}
	r := &Reader{}
	if err := capi.Reader_create(ctx, list, n, &r.h); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) raw() uintptr { return r.get("Reader") }

// Close stops the reader's threads; closing twice is fine.
func (r *Reader) Close() error {
	r.close(capi.Reader_destroy)
	return nil
}

// Next returns this rank's next batch, or nil (and no error) when it is out
// of data: then pass false to Context.DataSync.
func (r *Reader) Next() (*ReaderBatch, error) {
	var h uintptr
	if err := capi.Reader_next(r.raw(), &h); err != nil {
		return nil, err
	}
	if h == 0 {
		return nil, nil
	}
	defer capi.Reader_batch_free(h)
	info := func(field int32) int { return int(capi.Hbw_reader_batch_info(h, field)) }
	b := &ReaderBatch{Size: info(0), NumDense: info(1), NumSparse: info(2), Epoch: info(4)}
	b.Labels = make([]float32, b.Size)
	b.Dense = make([]float32, b.Size*b.NumDense)
	b.Offsets = make([]int64, b.NumSparse*b.Size+1)
	b.IDs = make([]int64, info(3))
	err := capi.Hbw_reader_batch_copy(h, ptr(b.Labels), ptr(b.Dense), ptr(b.Offsets), ptr(b.IDs))
	return b, err
}

// Lines delivered in batches so far; SkippedLines: malformed lines skipped.
func (r *Reader) Lines() uint64        { return capi.Reader_lines(r.raw()) }
func (r *Reader) SkippedLines() uint64 { return capi.Reader_skipped_lines(r.raw()) }

// NumFiles is the number of files after glob expansion.
func (r *Reader) NumFiles() int64 { return capi.Reader_num_files(r.raw()) }

// TotalBytes is the files' bytes laid end to end: the input of dynamic
// splits (plain files only).
func (r *Reader) TotalBytes() (int64, error) {
	var n int64
	err := capi.Reader_total_bytes(r.raw(), &n)
	return n, err
}

// SeekSplit makes the reader read split [from, end) of those bytes next.
func (r *Reader) SeekSplit(from, end int64) error {
	return capi.Reader_seek_split(r.raw(), from, end)
}

// SplitOffset is the offset to commit after the batches handed out so far
// in the current split (the split's end at its end).
func (r *Reader) SplitOffset() (int64, error) {
	var n int64
	err := capi.Reader_split_offset(r.raw(), &n)
	return n, err
}
