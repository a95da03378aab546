package org.hb;

/**
 * An embedding collection (hb_collection, hb.h): the
 * features of a model over several {@link Embedding} tables, looked up and
 * updated with one collective call each (docs/embedding-collections.md).
 *
 * <p>A batch is a flat KeyedJaggedTensor: {@code values} (int64: long[] or a
 * direct ByteBuffer), every feature's ids feature after feature;
 * {@code offsets} (long[], numFeatures * B + 1 entries: sample b of feature f
 * is values[offsets[f*B+b] .. offsets[f*B+b+1])); {@code weights} (float32
 * per id, or null). Pooled features fill one B x pooledWidth() float32
 * matrix; pooling-NONE features one row per id, concatenated in feature
 * order ({@link #unpooledSize}). Close the collection before its tables.
 */
public final class Collection extends NativeHandle {
  private final Embedding[] tables;  // kept reachable while the collection lives
  private final int numFeatures;
  private final long pooledWidth;
  private final long[] dims;
  private final boolean[] none;

  private Collection(long handle, Embedding[] tables) {
    super(handle);
    this.tables = tables.clone();
    numFeatures = tables.length;
    pooledWidth = HbNative.hb_collection_pooled_width(handle);
    dims = new long[numFeatures];
    none = new boolean[numFeatures];
    for (int f = 0; f < numFeatures; ++f) {
      dims[f] = HbNative.hb_collection_feature_dim(handle, f);
      none[f] = HbNative.hb_collection_feature_column(handle, f) < 0;
    }
  }

  /** Collective: feature f reads tables[f] with pooling[f] (Hb.HB_POOLING_*). */
  public static Collection create(Context ctx, Embedding[] tables, int[] pooling) throws HbException {
    if (tables.length != pooling.length) {
      throw new IllegalArgumentException("tables and pooling differ in length");
    }
    long[] handles = new long[tables.length];
    long[] pool = new long[tables.length];
    for (int f = 0; f < tables.length; ++f) {
      handles[f] = tables[f].handle();
      pool[f] = pooling[f];
    }
    long[] out = new long[1];
    HbNative.hb_collection_create(ctx.handle(), handles, pool, tables.length, out);
    return new Collection(out[0], tables);
  }

  @Override
  void destroy(long h) { HbNative.hb_collection_destroy(h); }

  public int numFeatures() { return numFeatures; }
  public long pooledWidth() { return pooledWidth; }
  /** Column of feature f in the pooled output; -1 for pooling NONE. */
  public long column(int f) { return HbNative.hb_collection_feature_column(handle(), f); }
  public long dim(int f) { return dims[f]; }

  private long batchSize(long[] offsets) {
    if (offsets.length < 1 || (offsets.length - 1) % numFeatures != 0) {
      throw new IllegalArgumentException("offsets: expected numFeatures * B + 1 = " + numFeatures
          + " * B + 1 entries, got " + offsets.length);
    }
    return (offsets.length - 1) / numFeatures;
  }

  /** Elements of the unpooled rows of a batch with these offsets. */
  public long unpooledSize(long[] offsets) {
    long b = batchSize(offsets), n = 0;
    for (int f = 0; f < numFeatures; ++f)
      if (none[f]) n += (offsets[(int) ((f + 1) * b)] - offsets[(int) (f * b)]) * dims[f];
    return n;
  }

  private long check(Object values, long[] offsets, Object weights) {
    long b = batchSize(offsets);
    long end = offsets[offsets.length - 1];
    Buffers.require(values, Hb.HB_INT64, end, "values");
    if (weights != null) Buffers.require(weights, Hb.HB_FLOAT32, end, "weights");
    return b;
  }

  /** Collective: the pooled B x pooledWidth() matrix (no pooling-NONE features). */
  public float[] lookup(Object values, long[] offsets, Object weights) throws HbException {
    float[] out = new float[Math.toIntExact(batchSize(offsets) * pooledWidth)];
    lookup(values, offsets, weights, out, null);
    return out;
  }

  /** Collective: out gets the pooled rows, unpooled the pooling-NONE rows. */
  public void lookup(Object values, long[] offsets, Object weights, Object out, Object unpooled)
      throws HbException {
    long b = check(values, offsets, weights);
    Buffers.require(out, Hb.HB_FLOAT32, b * pooledWidth, "out");
    long u = unpooledSize(offsets);
    if (u > 0) Buffers.require(unpooled, Hb.HB_FLOAT32, u, "unpooled");
    HbNative.hb_collection_lookup(handle(), b, values, offsets, weights, out, u > 0 ? unpooled : null);
  }

  /** Collective gradient step; reuses the last lookup's plan when every rank passes its ids. */
  public void applyGradients(Object values, long[] offsets, Object weights, Object gradOut,
                             Object gradUnpooled) throws HbException {
    long b = check(values, offsets, weights);
    long u = checkGrads(b, offsets, gradOut, gradUnpooled);
    HbNative.hb_collection_apply_gradients(handle(), b, values, offsets, weights, gradOut,
                                           u > 0 ? gradUnpooled : null);
  }

  /**
   * applyGradients plus the sum over the ranks of dense (float32: a float[] or a direct
   * ByteBuffer), carried in the update's own exchange (hb_collection_apply_gradients_dense:
   * no round of its own, the same bits as Context.allreduce with HB_SUM). The sum goes to
   * denseOut (as many floats), or into dense itself when denseOut is null. Every rank passes
   * as many floats.
   */
  public void applyGradients(Object values, long[] offsets, Object weights, Object gradOut,
                             Object gradUnpooled, Object dense, Object denseOut)
      throws HbException {
    long b = check(values, offsets, weights);
    long u = checkGrads(b, offsets, gradOut, gradUnpooled);
    long n = Buffers.elements(dense, Hb.HB_FLOAT32, "dense");
    Object out = denseOut == null ? dense : denseOut;
    Buffers.require(out, Hb.HB_FLOAT32, n, "denseOut");
    HbNative.hb_collection_apply_gradients_dense(handle(), b, values, offsets, weights, gradOut,
                                                 u > 0 ? gradUnpooled : null, dense, out, n);
  }

  /** Checks an update's gradients for a batch of b samples; returns the unpooled size. */
  private long checkGrads(long b, long[] offsets, Object gradOut, Object gradUnpooled) {
    Buffers.require(gradOut, Hb.HB_FLOAT32, b * pooledWidth, "gradOut");
    long u = unpooledSize(offsets);
    if (u > 0) Buffers.require(gradUnpooled, Hb.HB_FLOAT32, u, "gradUnpooled");
    return u;
  }

  /** This rank's counters: lookups, updates, reusedPlans, rounds, ids,
   *  uniqueIds, ownerUnique, wireBytesSent, wireBytesRecv, dedupBoundBytes. */
  public long[] stats() throws HbException {
    long[] s = new long[10];
    HbNative.hb_collection_get_stats(handle(), s);
    return s;
  }
}
