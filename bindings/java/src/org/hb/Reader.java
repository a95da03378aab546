package org.hb;

/**
 * Sharded, parallel reading of Criteo-format files (hb_reader, STABLE
 * section of hb.h): paths and glob patterns, plain or gzip, parsed ahead on
 * background threads. With a context the files are sharded over its ranks;
 * next() returns null when this rank is out of data (pair it with
 * Context.dataSync).
 */
public final class Reader extends NativeHandle {
  private Reader(long handle) { super(handle); }

  /** ctx may be null (read everything, or set Config.shard). */
  public static Reader create(Context ctx, String[] paths, Config config) throws HbException {
    hb_reader_config c = (config == null ? new Config() : config).toNative();
    try {
      long[] out = new long[1];
      HbNative.hb_reader_create(ctx == null ? 0 : ctx.handle(), paths, c, out);
      return new Reader(out[0]);
    } finally {
      c.delete();
    }
  }

  @Override
  void destroy(long h) { HbNative.hb_reader_destroy(h); }

  /** The next batch (copied into Java arrays), or null when out of data. */
  public Batch next() throws HbException {
    long[] out = new long[1];
    HbNative.hb_reader_next(handle(), out);
    if (out[0] == 0) return null;
    try {
      return new Batch(out[0]);
    } finally {
      HbNative.hb_reader_batch_free(out[0]);
    }
  }

  /** Lines delivered in batches so far. */
  public long lines() { return HbNative.hb_reader_lines(handle()); }
  /** Malformed lines skipped (Config.skipBadLines). */
  public long skippedLines() { return HbNative.hb_reader_skipped_lines(handle()); }
  /** Files after glob expansion. */
  public long numFiles() { return HbNative.hb_reader_num_files(handle()); }

  /** The files' bytes laid end to end: the input of dynamic splits. */
  public long totalBytes() throws HbException {
    long[] out = new long[1];
    HbNative.hb_reader_total_bytes(handle(), out);
    return out[0];
  }

  /** Reads split [from, end) of those bytes next (hb_reader_seek_split). */
  public void seekSplit(long from, long end) throws HbException {
    HbNative.hb_reader_seek_split(handle(), from, end);
  }

  /** The offset to commit after the batches handed out so far in the split. */
  public long splitOffset() throws HbException {
    long[] out = new long[1];
    HbNative.hb_reader_split_offset(handle(), out);
    return out[0];
  }

  /**
   * One batch of n samples in the embedding collection's layout: labels[n],
   * dense[n * numDense] row-major, offsets[numSparse * n + 1] and ids:
   * feature f, sample i has ids[offsets[f * n + i] .. offsets[f * n + i + 1]).
   */
  public static final class Batch {
    public final int size, numDense, numSparse, epoch;
    public final float[] labels, dense;
    public final long[] offsets, ids;

    Batch(long h) throws HbException {
      size = (int) HbNative.hbw_reader_batch_info(h, 0);
      numDense = (int) HbNative.hbw_reader_batch_info(h, 1);
      numSparse = (int) HbNative.hbw_reader_batch_info(h, 2);
      epoch = (int) HbNative.hbw_reader_batch_info(h, 4);
      labels = new float[size];
      dense = new float[size * numDense];
      offsets = new long[numSparse * size + 1];
      ids = new long[(int) HbNative.hbw_reader_batch_info(h, 3)];
      HbNative.hbw_reader_batch_copy(h, labels, dense, offsets, ids);
    }
  }

  /** Settings (hb_reader_config); unset fields keep hb.h's defaults. */
  public static final class Config {
    private static final hb_reader_config DEFAULTS = new hb_reader_config();

    private long batchSize = DEFAULTS.getBatch_size();
    private String columns = null;
    private int separator = DEFAULTS.getSeparator();
    private boolean logDense = false;
    private float denseMissing = DEFAULTS.getDense_missing();
    private long numRows = 0;
    private int hash = DEFAULTS.getHash();
    private boolean skipBadLines = false;
    private long maxLineBytes = DEFAULTS.getMax_line_bytes();
    private int numThreads = DEFAULTS.getNum_threads();
    private int queueDepth = DEFAULTS.getQueue_depth();
    private long chunkBytes = DEFAULTS.getChunk_bytes();
    private int numEpochs = DEFAULTS.getNum_epochs();
    private boolean shuffle = false;
    private long seed = 0;
    private boolean dropLast = false;
    private int shardIndex = DEFAULTS.getShard_index();
    private int numShards = DEFAULTS.getNum_shards();

    public Config batchSize(long v) { batchSize = v; return this; }
    /** One letter per column: L label, I dense, C categorical, S skipped. */
    public Config columns(String v) { columns = v; return this; }
    public Config separator(char v) { separator = v; return this; }
    public Config logDense(boolean v) { logDense = v; return this; }
    public Config denseMissing(float v) { denseMissing = v; return this; }
    /** Hash ids into [0, v) (Hb.HB_READER_HASH_MOD or _MIX). */
    public Config numRows(long v, int hashCode) { numRows = v; hash = hashCode; return this; }
    public Config skipBadLines(boolean v) { skipBadLines = v; return this; }
    public Config maxLineBytes(long v) { maxLineBytes = v; return this; }
    public Config threads(int v) { numThreads = v; return this; }
    public Config queueDepth(int v) { queueDepth = v; return this; }
    public Config chunkBytes(long v) { chunkBytes = v; return this; }
    /** 0: endless. */
    public Config epochs(int v) { numEpochs = v; return this; }
    public Config shuffle(long seedValue) { shuffle = true; seed = seedValue; return this; }
    public Config dropLast(boolean v) { dropLast = v; return this; }
    /** Explicit shard (no context needed). */
    public Config shard(int index, int count) { shardIndex = index; numShards = count; return this; }

    hb_reader_config toNative() {
      hb_reader_config c = new hb_reader_config();
      c.setBatch_size(batchSize);
      c.setColumns(columns);
      c.setSeparator(separator);
      c.setLog_dense(logDense ? 1 : 0);
      c.setDense_missing(denseMissing);
      c.setNum_rows(numRows);
      c.setHash(hash);
      c.setSkip_bad_lines(skipBadLines ? 1 : 0);
      c.setMax_line_bytes(maxLineBytes);
      c.setNum_threads(numThreads);
      c.setQueue_depth(queueDepth);
      c.setChunk_bytes(chunkBytes);
      c.setNum_epochs(numEpochs);
      c.setShuffle(shuffle ? 1 : 0);
      c.setSeed(seed);
      c.setDrop_last(dropLast ? 1 : 0);
      c.setShard_index(shardIndex);
      c.setNum_shards(numShards);
      return c;
    }
  }
}
