package org.hb;

/**
 * Settings of a dense buffer on the ps tasks (hb_ps_dense_config). Unset
 * fields keep hb.h's HB_PS_DENSE_CONFIG_INIT defaults, read from the library.
 */
public final class PsDenseConfig {
  private static final hb_ps_dense_config DEFAULTS = new hb_ps_dense_config();

  private final String name;
  private final long count;
  private int optimizer = DEFAULTS.getOptimizer();
  private double learningRate = DEFAULTS.getLearning_rate();
  private double initialAccumulator = DEFAULTS.getInitial_accumulator();
  private double beta1 = DEFAULTS.getBeta1();
  private double beta2 = DEFAULTS.getBeta2();
  private double epsilon = DEFAULTS.getEpsilon();
  private double l1 = DEFAULTS.getL1();
  private double l2 = DEFAULTS.getL2();
  private double lrPower = DEFAULTS.getLr_power();

  /** name: unique among the job's ps tables; count: float32 elements. */
  public PsDenseConfig(String name, long count) {
    this.name = name;
    this.count = count;
  }

  public long count() { return count; }

  /** Hb.HB_OPT_* and its learning rate. */
  public PsDenseConfig optimizer(int v, double lr) {
    optimizer = v;
    learningRate = lr;
    return this;
  }
  public PsDenseConfig initialAccumulator(double v) { initialAccumulator = v; return this; }
  public PsDenseConfig adam(double b1, double b2, double eps) {
    beta1 = b1;
    beta2 = b2;
    epsilon = eps;
    return this;
  }
  public PsDenseConfig epsilon(double v) { epsilon = v; return this; }
  public PsDenseConfig ftrl(double l1v, double l2v, double power) {
    l1 = l1v;
    l2 = l2v;
    lrPower = power;
    return this;
  }

  /** A native copy; the caller deletes it. */
  hb_ps_dense_config toNative() {
    hb_ps_dense_config c = new hb_ps_dense_config();
    c.setName(name);
    c.setCount(count);
    c.setOptimizer(optimizer);
    c.setLearning_rate(learningRate);
    c.setInitial_accumulator(initialAccumulator);
    c.setBeta1(beta1);
    c.setBeta2(beta2);
    c.setEpsilon(epsilon);
    c.setL1(l1);
    c.setL2(l2);
    c.setLr_power(lrPower);
    return c;
  }
}
