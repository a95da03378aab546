package org.hb;

/**
 * A table sharded over a context's ranks (hb_embedding), or a read-only
 * serving table ({@link #open}, thread-safe lookups). Rows are float32: ids
 * are long[] (or a direct ByteBuffer of int64), rows float[] (or float32).
 */
public final class Embedding extends NativeHandle {
  private Embedding(long handle) { super(handle); }

  /** Collective: every rank creates its shard. */
  public static Embedding create(Context ctx, EmbeddingConfig config) throws HbException {
    hb_embedding_config c = config.toNative();
    try {
      long[] out = new long[1];
      HbNative.hb_embedding_create(ctx.handle(), c, out);
      return new Embedding(out[0]);
    } finally {
      c.delete();
    }
  }

  /** A serving table from an export file; needs no context. */
  public static Embedding open(String path) throws HbException {
    long[] out = new long[1];
    HbNative.hb_embedding_open(path, out);
    return new Embedding(out[0]);
  }

  @Override
  void destroy(long h) { HbNative.hb_embedding_destroy(h); }

  public long dim() { return HbNative.hb_embedding_dim(handle()); }
  public long localRows() { return HbNative.hb_embedding_local_rows(handle()); }
  /** Serving tables: ids looked up that were not in the file. */
  public long misses() { return HbNative.hb_embedding_misses(handle()); }

  /** The rows of ids, ids.length x dim (collective unless serving). */
  public float[] lookup(long[] ids) throws HbException {
    float[] out = new float[Math.multiplyExact(ids.length, Math.toIntExact(dim()))];
    lookup(ids, out);
    return out;
  }

  /** out (n x dim float32) gets the rows of ids (n int64). */
  public void lookup(Object ids, Object out) throws HbException {
    long n = Buffers.elements(ids, Hb.HB_INT64, "ids");
    Buffers.require(out, Hb.HB_FLOAT32, n * dim(), "out");
    HbNative.hb_embedding_lookup(handle(), ids, n, out);
  }

  /** Collective: one optimizer step per touched row; grads is n x dim float32. */
  public void applyGradients(Object ids, Object grads) throws HbException {
    long n = Buffers.elements(ids, Hb.HB_INT64, "ids");
    Buffers.require(grads, Hb.HB_FLOAT32, n * dim(), "grads");
    HbNative.hb_embedding_apply_gradients(handle(), ids, n, grads);
  }

  /**
   * This rank's lifecycle counters (hb_embedding_lifecycle_stats): step,
   * rows, pending, admitted, dropped, evictedTtl, evictedL2,
   * evictedCapacity, boundaries, selectionRounds, boundary microseconds,
   * memoryBytes. A table created with a lifecycle only.
   */
  public long[] lifecycleStats() throws HbException {
    long[] s = new long[12];
    HbNative.hb_embedding_lifecycle_get_stats(handle(), s);
    return s;
  }

  public void save(String dir) throws HbException { HbNative.hb_embedding_save(handle(), dir); }
  public void load(String dir) throws HbException { HbNative.hb_embedding_load(handle(), dir); }
  /** Collective: rank 0 writes one serving file. */
  public void export(String path) throws HbException { HbNative.hb_embedding_export(handle(), path); }
}
