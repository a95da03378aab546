package org.hb;

/**
 * Settings of a sharded table (hb_embedding_config). Unset fields keep
 * hb.h's HB_EMBEDDING_CONFIG_INIT defaults, read from the library.
 */
public final class EmbeddingConfig {
  private static final hb_embedding_config DEFAULTS = new hb_embedding_config();

  private final String name;
  private final long dim;
  private int dtype = DEFAULTS.getDtype();
  private long numRows = DEFAULTS.getNum_rows();
  private int partition = DEFAULTS.getPartition();
  private int initializer = DEFAULTS.getInitializer();
  private double initA = DEFAULTS.getInit_a();
  private double initB = DEFAULTS.getInit_b();
  private long seed = DEFAULTS.getSeed();
  private final OptimizerFields opt = new OptimizerFields(DEFAULTS);
  private int wireDtype = DEFAULTS.getWire_dtype();
  private int device = DEFAULTS.getDevice();
  private int placement = DEFAULTS.getPlacement();
  private EmbeddingLifecycle lifecycle;

  /** name: unique per context; dim: row width. */
  public EmbeddingConfig(String name, long dim) {
    this.name = name;
    this.dim = dim;
  }

  public EmbeddingConfig dtype(int v) { dtype = v; return this; }
  /** > 0: static ids [0, numRows); 0: a dynamic hash table. */
  public EmbeddingConfig numRows(long v) { numRows = v; return this; }
  /** Hb.HB_PARTITION_MOD or Hb.HB_PARTITION_DIV. */
  public EmbeddingConfig partition(int v) { partition = v; return this; }
  /** Hb.HB_INIT_* with its parameters a and b. */
  public EmbeddingConfig initializer(int v, double a, double b) {
    initializer = v;
    initA = a;
    initB = b;
    return this;
  }
  public EmbeddingConfig seed(long v) { seed = v; return this; }
  /** Hb.HB_OPT_* and its learning rate. */
  public EmbeddingConfig optimizer(int v, double lr) { opt.optimizer(v, lr); return this; }
  public EmbeddingConfig initialAccumulator(double v) { opt.initialAccumulator = v; return this; }
  public EmbeddingConfig adam(double b1, double b2, double eps) { opt.adam(b1, b2, eps); return this; }
  public EmbeddingConfig epsilon(double v) { opt.epsilon = v; return this; }
  public EmbeddingConfig ftrl(double l1v, double l2v, double power) { opt.ftrl(l1v, l2v, power); return this; }
  public EmbeddingConfig wireDtype(int v) { wireDtype = v; return this; }
  /** -1: host memory; N: CUDA device N. */
  public EmbeddingConfig device(int v) { device = v; return this; }
  /**
   * Hb.HB_PLACEMENT_WORKERS (sharded over the ranks) or Hb.HB_PLACEMENT_PS
   * (on the job's ps tasks: lookups and updates are not collective;
   * docs/parameter-servers.md).
   */
  public EmbeddingConfig placement(int v) { placement = v; return this; }
  /** Admission and eviction (EXPERIMENTAL); null: none. */
  public EmbeddingConfig lifecycle(EmbeddingLifecycle v) { lifecycle = v; return this; }

  /** A native copy; the caller deletes it. */
  hb_embedding_config toNative() {
    hb_embedding_config c = new hb_embedding_config();
    c.setName(name);
    c.setDim(dim);
    c.setDtype(dtype);
    c.setNum_rows(numRows);
    c.setPartition(partition);
    c.setInitializer(initializer);
    c.setInit_a(initA);
    c.setInit_b(initB);
    c.setSeed(seed);
    opt.applyTo(c);
    c.setWire_dtype(wireDtype);
    c.setDevice(device);
    c.setPlacement(placement);
    if (lifecycle != null) c.use_lifecycle(lifecycle.toNative());
    return c;
  }
}
