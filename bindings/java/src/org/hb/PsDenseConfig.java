package org.hb;

/**
 * Settings of a dense buffer on the ps tasks (hb_ps_dense_config). Unset
 * fields keep hb.h's HB_PS_DENSE_CONFIG_INIT defaults, read from the library.
 */
public final class PsDenseConfig {
  private static final hb_ps_dense_config DEFAULTS = new hb_ps_dense_config();

  private final String name;
  private final long count;
  private final OptimizerFields opt = new OptimizerFields(DEFAULTS);

  /** name: unique among the job's ps tables; count: float32 elements. */
  public PsDenseConfig(String name, long count) {
    this.name = name;
    this.count = count;
  }

  public long count() { return count; }

  /** Hb.HB_OPT_* and its learning rate (the tables' optimizers, element-wise). */
  public PsDenseConfig optimizer(int v, double lr) { opt.optimizer(v, lr); return this; }
  public PsDenseConfig initialAccumulator(double v) { opt.initialAccumulator = v; return this; }
  public PsDenseConfig adam(double b1, double b2, double eps) { opt.adam(b1, b2, eps); return this; }
  public PsDenseConfig epsilon(double v) { opt.epsilon = v; return this; }
  public PsDenseConfig ftrl(double l1v, double l2v, double power) { opt.ftrl(l1v, l2v, power); return this; }

  /** A native copy; the caller deletes it. */
  hb_ps_dense_config toNative() {
    hb_ps_dense_config c = new hb_ps_dense_config();
    c.setName(name);
    c.setCount(count);
    opt.applyTo(c);
    return c;
  }
}
