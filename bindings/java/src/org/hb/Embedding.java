package org.hb;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A table sharded over a context's ranks (hb_embedding), or a read-only
 * serving table ({@link #open}, thread-safe lookups). Rows are float32: ids
 * are long[] (or a direct ByteBuffer of int64), rows float[] (or float32).
 *
 * <p>A serving table follows training: {@link #update} applies a delta or
 * opens a newer full export while other threads keep calling
 * {@link #lookup(long[], float[])}, which returns the version it read (one
 * version per call). Its lookups are one native call that copies neither
 * the ids nor the rows.
 */
public final class Embedding extends NativeHandle {
  private final long dim;          // fixed for the handle's life
  private final boolean serving;   // opened from a file

  private Embedding(long handle, boolean serving) {
    super(handle);
    this.dim = HbNative.hb_embedding_dim(handle);
    this.serving = serving;
  }

  /** Collective: every rank creates its shard. */
  public static Embedding create(Context ctx, EmbeddingConfig config) throws HbException {
    hb_embedding_config c = config.toNative();
    try {
      long[] out = new long[1];
      HbNative.hb_embedding_create(ctx.handle(), c, out);
      return new Embedding(out[0], false);
    } finally {
      c.delete();
    }
  }

  /** A serving table from an export file; needs no context. */
  public static Embedding open(String path) throws HbException {
    long[] out = new long[1];
    HbNative.hb_embedding_open(path, out);
    return new Embedding(out[0], true);
  }

  @Override
  void destroy(long h) { HbNative.hb_embedding_destroy(h); }

  public long dim() { return dim; }
  public long localRows() { return HbNative.hb_embedding_local_rows(handle()); }
  /** Serving tables: ids looked up that were not in the file. */
  public long misses() { return HbNative.hb_embedding_misses(handle()); }

  /** The rows of ids, ids.length x dim (collective unless serving). */
  public float[] lookup(long[] ids) throws HbException {
    float[] out = new float[Math.multiplyExact(ids.length, Math.toIntExact(dim()))];
    lookup(ids, out);
    return out;
  }

  /**
   * out (n x dim float32) gets the rows of ids (n int64): long[] / float[]
   * or direct native-order ByteBuffers. Returns the served version the rows
   * came from (0 for a sharded table or an unversioned export).
   */
  public long lookup(Object ids, Object out) throws HbException {
    if (ids instanceof long[] && out instanceof float[]) return lookup((long[]) ids, (float[]) out);
    if (serving && ids instanceof ByteBuffer && out instanceof ByteBuffer) {
      return lookup((ByteBuffer) ids, (ByteBuffer) out);
    }
    long n = Buffers.elements(ids, Hb.HB_INT64, "ids");
    Buffers.require(out, Hb.HB_FLOAT32, n * dim, "out");
    long[] version = new long[1];
    HbNative.hb_embedding_lookup_version(handle(), ids, n, out, version);
    return version[0];
  }

  /** The rows of ids into out (at least ids.length x dim); returns the version read. */
  public long lookup(long[] ids, float[] out) throws HbException {
    if (out.length / dim < ids.length) {
      throw new IllegalArgumentException("out: needs " + ids.length * dim + " elements, has " + out.length);
    }
    if (serving) return HbNativeJNI.servingLookupArrays(handle(), ids, ids.length, out);
    long[] version = new long[1];
    HbNative.hb_embedding_lookup_version(handle(), ids, ids.length, out, version);
    return version[0];
  }

  /**
   * The rows of the int64 ids in the direct, native-order buffer ids (its
   * capacity, whole) into out; returns the version read.
   */
  public long lookup(ByteBuffer ids, ByteBuffer out) throws HbException {
    long n = directElements(ids, 8, "ids");
    if (directElements(out, 4, "out") / dim < n) {
      throw new IllegalArgumentException("out: needs " + n * dim * 4 + " bytes, has " + out.capacity());
    }
    if (serving) return HbNativeJNI.servingLookupDirect(handle(), ids, n, out);
    long[] version = new long[1];
    HbNative.hb_embedding_lookup_version(handle(), ids, n, out, version);
    return version[0];
  }

  private static long directElements(ByteBuffer b, int size, String param) {
    if (!b.isDirect()) {
      throw new IllegalArgumentException(param + ": the ByteBuffer is not direct (use ByteBuffer.allocateDirect)");
    }
    if (b.order() != ByteOrder.nativeOrder() || b.capacity() % size != 0) {
      throw new IllegalArgumentException(param + ": needs ByteOrder.nativeOrder() and a whole number of "
          + size + "-byte elements");
    }
    return b.capacity() / size;
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

  /**
   * Collective: writes version {@code version} (larger than every earlier
   * one), in full ({@code base == 0}) or as a delta since the export of
   * version {@code base}.
   */
  public void exportVersion(String path, long version, long base) throws HbException {
    HbNative.hb_embedding_export_version(handle(), path, version, base);
  }

  /**
   * Serving tables: applies the delta or opens the newer full export at
   * path while other threads keep looking up. A damaged or out-of-order
   * file throws and the served version stays.
   */
  public void update(String path) throws HbException { HbNative.hb_embedding_update(handle(), path); }

  /** Serving tables: the version served now (0 for an unversioned export). */
  public long version() { return HbNative.hb_embedding_version(handle()); }
}
