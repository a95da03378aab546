package org.hb;

import java.nio.ByteBuffer;

/**
 * A group of ranks (hb_context). Creating one is collective: every rank must.
 * Buffers are primitive arrays (dtype from the array type) or direct
 * ByteBuffers in native order (pass the dtype; the whole buffer from its
 * address to its capacity is used, whatever its position and limit). Lengths
 * are checked here: a buffer too short for the call is an
 * IllegalArgumentException naming the parameter. Close embeddings and metrics
 * made on a context before the context itself (try-with-resources does).
 */
public final class Context extends NativeHandle {
  private Context(long handle) { super(handle); }

  /** Discover everything from the environment (hbrun, TF_CONFIG, or a world of one). */
  public static Context create() throws HbException { return create(new ContextOptions()); }

  public static Context create(ContextOptions options) throws HbException {
    hb_context_options o = options.toNative();
    try {
      long[] out = new long[1];
      HbNative.hb_context_create(o, out);
      return new Context(out[0]);
    } finally {
      o.delete();
    }
  }

  /** Leaves the cluster and frees everything, listeners included. */
  @Override
  void destroy(long h) {
    HbNative.hb_context_destroy(h);
    HbNative.hbj_release_listeners(h);
  }

  public int rank() { return HbNative.hb_context_rank(handle()); }
  public int worldSize() { return HbNative.hb_context_world_size(handle()); }
  public int localRank() { return HbNative.hb_context_local_rank(handle()); }
  public int localWorldSize() { return HbNative.hb_context_local_world_size(handle()); }
  public boolean isChief() { return HbNative.hb_context_is_chief(handle()) != 0; }
  public String taskType() { return HbNative.hb_context_task_type(handle()); }
  public int taskId() { return HbNative.hb_context_task_id(handle()); }
  public int numGpus() { return HbNative.hb_context_num_gpus(handle()); }
  /** "cpu:0" or "cuda:N". */
  public String device() { return HbNative.hb_context_device(handle()); }

  /** Number of ps tasks of the job (0: collective mode). */
  public int numPs() { return HbNative.hb_context_num_ps(handle()); }

  // ---- Parameter servers (EXPERIMENTAL; docs/parameter-servers.md) ----

  /**
   * On a ps task ({@code taskType()} is "ps"): serve the workers' ps tables
   * and dense buffers until every worker has left. Throws HB_ERR_PEER_FAILED
   * when workers were lost and none came back, HB_ERR_TIMEOUT when none
   * came, HB_ERR_INVALID_ARGUMENT on a worker.
   */
  public void serve() throws HbException { HbNative.hb_context_serve(handle()); }

  /**
   * The reader position (at most 64 KiB) this worker's next pushes carry;
   * each ps task commits it with the push's gradients, atomically.
   */
  public void psSetPosition(byte[] position) throws HbException {
    if (position == null) throw new IllegalArgumentException("position: null");
    HbNative.hb_ps_set_position(handle(), position, position.length);
  }

  /**
   * After a restart (and after creating the ps tables): the position this
   * worker committed with its last step applied everywhere, or null when it
   * committed nothing. The tables resume at that step.
   */
  public byte[] psPosition() throws HbException { return psPosition(new long[1]); }

  /** As {@link #psPosition()}; step[0] gets the step count of that position. */
  public byte[] psPosition(long[] step) throws HbException {
    if (step == null || step.length < 1) throw new IllegalArgumentException("step: expected a long[1] holder");
    byte[][] out = new byte[1][];
    HbNative.hb_ps_position(handle(), out, step);
    return step[0] > 0 ? out[0] : null;
  }

  /**
   * Dynamic splits (option ps_split_samples on ps task 0): this worker's next
   * split, or null when every split is handed out (hb_ps_split_next).
   */
  public PsSplit psSplitNext() throws HbException {
    long[] v = new long[6];
    HbNative.hb_ps_split_next(handle(), v);
    return v[0] >= 0 ? new PsSplit(v) : null;
  }

  /**
   * psSplitNext without waiting (hb_ps_split_try): a split whose split is
   * {@link #PS_SPLIT_LATER} when other workers hold every split left (make
   * an empty step and ask again, so a loop with job checkpoints reaches
   * every save); null when every split is finished.
   */
  public PsSplit psSplitTry() throws HbException {
    long[] v = new long[6];
    HbNative.hb_ps_split_try(handle(), v);
    return v[0] != -1 ? new PsSplit(v) : null;
  }

  /** psSplitTry's split number when no split can be handed out now. */
  public static final long PS_SPLIT_LATER = -2;

  /**
   * Before a step's pushes (in place of psSetPosition): the step consumes
   * {@code split} up to {@code offset} (its end finishes it). The position
   * rides with the pushes; the queue hears of it at the next call.
   */
  public void psSplitCommit(long split, long offset) throws HbException {
    HbNative.hb_ps_split_commit(handle(), split, offset);
  }

  /** The ps tasks' counters (summed; maxStaleness the largest). */
  public PsStats psStats() throws HbException {
    long[] v = new long[13];
    HbNative.hb_ps_get_stats(handle(), v);
    return new PsStats(v);
  }

  public String getOption(String name) throws HbException {
    String[] out = new String[1];
    HbNative.hb_context_get_option(handle(), name, out);
    return out[0];
  }

  /** Type-checked: a malformed value or unknown name is HB_ERR_CONFIG naming both. */
  public void setOption(String name, String value) throws HbException {
    HbNative.hb_context_set_option(handle(), name, value);
  }

  /** timeoutMs <= 0: the timeout_ms option. */
  public void barrier(long timeoutMs) throws HbException { HbNative.hb_context_barrier(handle(), timeoutMs); }

  /** Every rank's pending and later calls fail with HB_ERR_ABORTED; safe from any thread. */
  public void abort(String reason) throws HbException { HbNative.hb_context_abort(handle(), reason); }

  /** A cudaStream_t as a long; 0 restores the context's own stream. */
  public void setCudaStream(long stream) throws HbException {
    HbNative.hb_context_set_cuda_stream(handle(), stream);
  }

  public void synchronize() throws HbException { HbNative.hb_context_synchronize(handle()); }

  /** listener.onEvent(event, path) around checkpoint saves and loads (Hb.HB_EVENT_*). */
  public void addListener(int event, Listener listener) throws HbException {
    HbNative.hb_context_add_listener(handle(), event, listener);
  }

  /** {continue, feedEmpty} for this step (hb_data_sync). */
  public boolean[] dataSync(boolean hasData, boolean dropRemainder) throws HbException {
    int[] cont = new int[1], empty = new int[1];
    HbNative.hb_data_sync(handle(), hasData ? 1 : 0, dropRemainder ? 1 : 0, cont, empty);
    return new boolean[] {cont[0] != 0, empty[0] != 0};
  }

  // ---- Collectives (same order on every rank; recv may be send: in place) ----

  public void allreduce(Object send, Object recv, int op) throws HbException {
    allreduce(send, recv, Buffers.dtypeOf(send, "send"), op);
  }

  public void allreduce(Object send, Object recv, int dtype, int op) throws HbException {
    long n = Buffers.elements(send, dtype, "send");
    Buffers.require(recv, dtype, n, "recv");
    HbNative.hb_allreduce(handle(), send, recv, n, dtype, op);
  }

  /**
   * Starts allreduce(send, recv) on the context's progress thread
   * (hb_allreduce_start) and returns at once; the request's waitFor()
   * completes it, bit-identical to allreduce. send and recv (may be the same
   * buffer) must be direct, native-order ByteBuffers: a Java array is
   * pinned or copied for one native call only, and the library writes recv
   * after this call returns. The request holds both until waitFor().
   */
  public AllreduceRequest allreduceStart(ByteBuffer send, ByteBuffer recv, int dtype, int op)
      throws HbException {
    long n = Buffers.elements(send, dtype, "send");
    Buffers.require(recv, dtype, n, "recv");
    long[] out = new long[1];
    HbNative.hb_allreduce_start(handle(), send, recv, n, dtype, op, out);
    return new AllreduceRequest(out[0], send, recv);
  }

  /** recv gets worldSize blocks: rank r's send at r * send's length. */
  public void allgather(Object send, Object recv) throws HbException {
    allgather(send, recv, Buffers.dtypeOf(send, "send"));
  }

  public void allgather(Object send, Object recv, int dtype) throws HbException {
    long n = Buffers.elements(send, dtype, "send");
    Buffers.require(recv, dtype, n * worldSize(), "recv");
    HbNative.hb_allgather(handle(), send, recv, n, dtype);
  }

  /** Rank r's send (recvCounts[r] elements) lands at recvOffsets[r] (null: packed). */
  public void allgatherv(Object send, Object recv, long[] recvCounts, long[] recvOffsets) throws HbException {
    int dtype = Buffers.dtypeOf(send, "send");
    long n = Buffers.elements(send, dtype, "send");
    Buffers.require(recv, dtype, Buffers.extent(recvCounts, recvOffsets, worldSize(), "recvCounts"), "recv");
    HbNative.hb_allgatherv(handle(), send, n, recv, recvCounts, recvOffsets, dtype);
  }

  /** send holds worldSize equal blocks; block p goes to rank p. */
  public void alltoall(Object send, Object recv) throws HbException {
    int dtype = Buffers.dtypeOf(send, "send");
    long n = Buffers.elements(send, dtype, "send");
    int world = worldSize();
    if (n % world != 0) {
      throw new IllegalArgumentException("send: " + n + " elements do not split into " + world + " blocks");
    }
    Buffers.require(recv, dtype, n, "recv");
    HbNative.hb_alltoall(handle(), send, recv, n / world, dtype);
  }

  /** Per-peer counts and offsets in elements, one per rank (offsets null: packed). */
  public void alltoallv(Object send, long[] sendCounts, long[] sendOffsets, Object recv, long[] recvCounts,
      long[] recvOffsets) throws HbException {
    int dtype = Buffers.dtypeOf(send, "send");
    int world = worldSize();
    Buffers.require(send, dtype, Buffers.extent(sendCounts, sendOffsets, world, "sendCounts"), "send");
    Buffers.require(recv, dtype, Buffers.extent(recvCounts, recvOffsets, world, "recvCounts"), "recv");
    HbNative.hb_alltoallv(handle(), send, sendCounts, sendOffsets, recv, recvCounts, recvOffsets, dtype);
  }

  /** root's send is copied into recv on every rank (send may be null elsewhere). */
  public void broadcast(Object send, Object recv, int root) throws HbException {
    int dtype = Buffers.dtypeOf(recv, "recv");
    long n = Buffers.elements(recv, dtype, "recv");
    if (send != null) Buffers.require(send, dtype, n, "send");
    HbNative.hb_broadcast(handle(), send, recv, n, dtype, root);
  }

  /** send holds worldSize blocks of recv's length; rank r gets the reduction of block r. */
  public void reduceScatter(Object send, Object recv, int op) throws HbException {
    int dtype = Buffers.dtypeOf(recv, "recv");
    long n = Buffers.elements(recv, dtype, "recv");
    Buffers.require(send, dtype, n * worldSize(), "send");
    HbNative.hb_reduce_scatter(handle(), send, recv, n, dtype, op);
  }

  /** Reduce primitive arrays of one type in place, fused into buckets. */
  public void allreduceMany(Object[] arrays, int op) throws HbException {
    if (arrays.length == 0) return;
    int dtype = Buffers.dtypeOf(arrays[0], "arrays[0]");
    for (int i = 0; i < arrays.length; ++i) Buffers.elements(arrays[i], dtype, "arrays[" + i + "]");
    HbNative.hb_allreduce_many(handle(), arrays, dtype, op);
  }
}
