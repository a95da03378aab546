package org.hb;

/**
 * A dense float32 buffer on the ps tasks (hb_ps_dense; tensorpack's
 * parameter_server layout): {@link #pull} before the step, {@link #push} the
 * gradient after; the ps tasks apply the buffer's optimizer element-wise,
 * with the tables' staleness and rounds. Every worker creates it with the
 * same config; init is taken from the worker that creates it first.
 * Buffers are float[] or direct native-order ByteBuffers (zero-copy), of
 * count elements. Each call is one native call.
 */
public final class PsDense extends NativeHandle {
  private final long count;

  private PsDense(long handle, long count) {
    super(handle);
    this.count = count;
  }

  /** init: count float32 (float[] or a direct ByteBuffer), or null for zeros. */
  public static PsDense create(Context ctx, PsDenseConfig config, Object init) throws HbException {
    if (init != null) Buffers.require(init, Hb.HB_FLOAT32, config.count(), "init");
    hb_ps_dense_config c = config.toNative();
    try {
      long[] out = new long[1];
      HbNative.hb_ps_dense_create(ctx.handle(), c, init, out);
      return new PsDense(out[0], config.count());
    } finally {
      c.delete();
    }
  }

  @Override
  void destroy(long h) { HbNative.hb_ps_dense_destroy(h); }

  public long count() { return count; }

  /** The buffer as of this worker's step, into out (count float32). */
  public void pull(Object out) throws HbException {
    Buffers.require(out, Hb.HB_FLOAT32, count, "out");
    HbNative.hb_ps_dense_pull(handle(), out);
  }

  /** The buffer as of this worker's step, in a new float[]. */
  public float[] pull() throws HbException {
    float[] out = new float[Math.toIntExact(count)];
    pull(out);
    return out;
  }

  /** One optimizer step with grads (count float32; summed over a round's workers at staleness 0). */
  public void push(Object grads) throws HbException {
    Buffers.require(grads, Hb.HB_FLOAT32, count, "grads");
    HbNative.hb_ps_dense_push(handle(), grads);
  }
}
