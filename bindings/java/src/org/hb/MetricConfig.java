package org.hb;

/**
 * Settings of a metric (hb_metric_config). Unset fields keep hb.h's
 * HB_METRIC_CONFIG_INIT defaults, read from the library.
 */
public final class MetricConfig {
  private static final hb_metric_config DEFAULTS = new hb_metric_config();

  private final int kind;
  private int numThresholds = DEFAULTS.getNum_thresholds();
  private int curve = DEFAULTS.getCurve();
  private int summation = DEFAULTS.getSummation();
  private int gaucWeighting = DEFAULTS.getGauc_weighting();
  private double threshold = DEFAULTS.getThreshold();
  private long bins = DEFAULTS.getBins();

  /** kind: Hb.HB_METRIC_*. */
  public MetricConfig(int kind) { this.kind = kind; }

  public MetricConfig numThresholds(int v) { numThresholds = v; return this; }
  public MetricConfig curve(int v) { curve = v; return this; }
  public MetricConfig summation(int v) { summation = v; return this; }
  public MetricConfig gaucWeighting(int v) { gaucWeighting = v; return this; }
  /** Accuracy: threshold predictions first when >= 0. */
  public MetricConfig threshold(double v) { threshold = v; return this; }
  /** Exact AUC / GAUC: 0 exact, > 0 a bounded-memory histogram. */
  public MetricConfig bins(long v) { bins = v; return this; }

  hb_metric_config toNative() {
    hb_metric_config c = new hb_metric_config();
    c.setKind(kind);
    c.setNum_thresholds(numThresholds);
    c.setCurve(curve);
    c.setSummation(summation);
    c.setGauc_weighting(gaucWeighting);
    c.setThreshold(threshold);
    c.setBins(bins);
    return c;
  }
}
