package org.hb;

/**
 * Library-wide calls and every constant of hb.h (Hb.HB_FLOAT32, Hb.HB_SUM,
 * Hb.HB_ERR_TIMEOUT, ...). Handles: {@link Context}, {@link Embedding},
 * {@link Metric}.
 */
public final class Hb implements HbNativeConstants {
  private Hb() {}

  /** Version of the loaded libhb: MAJOR * 10000 + MINOR * 100 + PATCH. */
  public static long versionNumber() { return HbNative.hb_version_number(); }

  /** One line describing the build and the machine. */
  public static String buildInfo() { return HbNative.hb_build_info(); }

  /** Constant name of a status, e.g. "HB_ERR_TIMEOUT". */
  public static String statusName(int status) { return HbNative.hb_status_name(status); }

  /** hb_last_error() of the calling thread (HbException.detail() holds it too). */
  public static String lastError() { return HbNative.hb_last_error(); }

  /** Bytes per element of a dtype; 0 for an unknown one. */
  public static long dtypeSize(int dtype) { return HbNative.hb_dtype_size(dtype); }

  /** Process-wide value of an option (default plus HB_NAME), as a string. */
  public static String getOption(String name) throws HbException {
    String[] out = new String[1];
    HbNative.hb_context_get_option(0, name, out);
    return out[0];
  }

  /** {name, type, default, doc} of option number index (HbException past the last). */
  public static String[] describeOption(long index) throws HbException {
    String[] name = new String[1], type = new String[1], def = new String[1], doc = new String[1];
    HbNative.hb_option_describe(index, name, type, def, doc);
    return new String[] {name[0], type[0], def[0], doc[0]};
  }

  /** A TF_CONFIG JSON document, as HybridBackend's set_tf_config. */
  public static String tfConfigBuild(String taskType, int taskId, String[] workerHosts, String[] psHosts,
      boolean hasEvaluator) throws HbException {
    String[] out = new String[1];
    HbNative.hb_tf_config_build(taskType, taskId, workerHosts, psHosts == null ? new String[0] : psHosts,
        hasEvaluator ? 1 : 0, out);
    return out[0];
  }

  /** {begin, end} of shard's contiguous, even share of numItems items. */
  public static long[] shardRange(long numItems, int numShards, int shard, boolean strict) throws HbException {
    long[] begin = new long[1], end = new long[1];
    HbNative.hb_shard_range(numItems, numShards, shard, strict ? 1 : 0, begin, end);
    return new long[] {begin[0], end[0]};
  }

  /** AdaNet ReplicationStrategy answers for one worker. */
  public static Placement placementReplication(int numWorkers, int workerIndex, int numSubnetworks)
      throws HbException {
    Placement p = new Placement(numSubnetworks);
    HbNative.hb_placement_replication(numWorkers, workerIndex, numSubnetworks, p.ensemble, p.train, p.build);
    return p;
  }

  /** AdaNet RoundRobinStrategy answers for one worker. */
  public static Placement placementRoundRobin(int numWorkers, int workerIndex, int numSubnetworks,
      boolean dropRemainder) throws HbException {
    Placement p = new Placement(numSubnetworks);
    HbNative.hb_placement_round_robin(numWorkers, workerIndex, numSubnetworks, dropRemainder ? 1 : 0,
        p.ensemble, p.train, p.build);
    return p;
  }

  /** Which parts of an AdaNet ensemble a worker builds and trains. */
  public static final class Placement {
    final int[] ensemble = new int[1];
    final int[] train = new int[1];
    final int[] build;

    Placement(int numSubnetworks) {
      if (numSubnetworks < 0) throw new IllegalArgumentException("numSubnetworks: must be >= 0");
      build = new int[numSubnetworks];
    }

    public boolean buildEnsemble() { return ensemble[0] != 0; }

    public boolean trainSubnetworks() { return train[0] != 0; }

    public boolean buildSubnetwork(int i) { return build[i] != 0; }
  }
}
