package org.hb;

/**
 * A streaming metric (hb_metric). With a context, result() is collective and
 * merges every rank's samples; with none (null) it is local. Labels,
 * predictions and weights are float[] (or direct float32 ByteBuffers).
 */
public final class Metric extends NativeHandle {
  private Metric(long handle) { super(handle); }

  /** ctx may be null: a local metric. */
  public static Metric create(Context ctx, MetricConfig config) throws HbException {
    hb_metric_config c = config.toNative();
    try {
      long[] out = new long[1];
      HbNative.hb_metric_create(ctx == null ? 0 : ctx.handle(), c, out);
      return new Metric(out[0]);
    } finally {
      c.delete();
    }
  }

  @Override
  void destroy(long h) { HbNative.hb_metric_destroy(h); }

  /** weights may be null (all 1). */
  public void update(Object labels, Object preds, Object weights) throws HbException {
    long n = samples(labels, preds, weights);
    HbNative.hb_metric_update(handle(), labels, preds, weights, n);
  }

  /** GAUC: a group id (long) per sample as well. */
  public void updateGrouped(Object labels, Object preds, Object weights, Object groups) throws HbException {
    long n = samples(labels, preds, weights);
    Buffers.require(groups, Hb.HB_INT64, n, "groups");
    HbNative.hb_metric_update_grouped(handle(), labels, preds, weights, groups, n);
  }

  public double result() throws HbException {
    double[] out = new double[1];
    HbNative.hb_metric_result(handle(), out);
    return out[0];
  }

  /** Hb.HB_METRIC_FLAG_* bits of the last result. */
  public int flags() { return HbNative.hb_metric_flags(handle()); }

  public void reset() throws HbException { HbNative.hb_metric_reset(handle()); }

  private static long samples(Object labels, Object preds, Object weights) {
    long n = Buffers.elements(labels, Hb.HB_FLOAT32, "labels");
    Buffers.require(preds, Hb.HB_FLOAT32, n, "preds");
    if (weights != null) Buffers.require(weights, Hb.HB_FLOAT32, n, "weights");
    return n;
  }
}
