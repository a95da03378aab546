import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.hb.Embedding;
import org.hb.Hb;
import org.hb.HbException;
import org.hb.Metric;
import org.hb.MetricConfig;

/**
 * Serving from Java: open an exported wide table (no context), score
 * held-out criteo-synth samples from several threads (lookups on a serving
 * table are thread-safe), and compute the exact AUC with a local metric.
 *
 * <pre>
 *   java -Djava.library.path=DIR -cp hb.jar:. ServingJava WIDE.hbe SEED VOCAB SAMPLES THREADS
 * </pre>
 *
 * The scorer is serving_ref's (examples/serving_ref): sigmoid of the sum of
 * the sample's 26 wide rows, with table 25's id replaced by an unknown one
 * on every 16th sample. The last line, "AUC auc misses n", must equal
 * serving_ref's.
 */
public final class ServingJava {
  private static final int BATCH = 64; // samples per lookup call
  private static final int T = Synth.TABLES;

  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: ServingJava WIDE.hbe SEED VOCAB SAMPLES THREADS");
      System.exit(2);
    }
    long seed = Long.parseUnsignedLong(args[1]);
    long vocab = Long.parseLong(args[2]);
    int n = Integer.parseInt(args[3]), threads = Integer.parseInt(args[4]);
    if (vocab <= 0 || (vocab & (vocab - 1)) != 0 || n <= 0 || threads <= 0) {
      System.err.println("ServingJava: VOCAB a power of two; SAMPLES, THREADS > 0");
      System.exit(2);
    }
    try (Embedding table = Embedding.open(args[0])) {
      run(table, seed, vocab, n, threads);
    } catch (HbException e) {
      System.err.println("ServingJava: " + e.statusName() + ": " + e.detail());
      System.exit(1);
    }
  }

  private static void run(Embedding table, long seed, long vocab, int n, int threads)
      throws Exception {
    if (table.dim() != 1) throw new IllegalStateException("dim " + table.dim() + ", expected 1");
    Synth gen = new Synth(seed, vocab, 1.1);
    Synth.Sample[] samples = new Synth.Sample[n];
    float[] labels = new float[n];
    for (int i = 0; i < n; ++i) {
      samples[i] = new Synth.Sample();
      gen.sample(1, i, samples[i]);
      labels[i] = samples[i].label;
    }

    // Threads claim batches of samples from a shared counter.
    float[] preds = new float[n];
    AtomicInteger next = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    long start = System.nanoTime();
    List<Future<Void>> done = new ArrayList<>();
    for (int w = 0; w < threads; ++w) {
      done.add(pool.submit(() -> {
        long[] ids = new long[BATCH * T];
        for (int lo; (lo = next.getAndAdd(BATCH)) < n; ) {
          score(table, vocab, samples, lo, Math.min(n, lo + BATCH), ids, preds);
        }
        return null;
      }));
    }
    try {
      for (Future<Void> f : done) f.get(); // rethrows a worker's exception
    } finally {
      pool.shutdown();
    }
    double seconds = (System.nanoTime() - start) * 1e-9;

    try (Metric auc = Metric.create(null, new MetricConfig(Hb.HB_METRIC_AUC_EXACT))) {
      auc.update(labels, preds, null);
      System.out.printf("ServingJava: %d samples, %d threads, %.4f s: %.0f samples/s, %.0f rows/s%n",
                        n, threads, seconds, n / seconds, (double) n * T / seconds);
      System.out.printf("AUC %.9f misses %d%n", auc.result(), table.misses());
    }
  }

  /** preds[lo, hi) with one lookup for the batch. */
  private static void score(Embedding table, long vocab, Synth.Sample[] samples, int lo, int hi,
                            long[] buf, float[] preds) throws HbException {
    long[] ids = hi - lo == BATCH ? buf : new long[(hi - lo) * T];
    for (int i = lo; i < hi; ++i) {
      int k = (i - lo) * T;
      for (int t = 0; t < T; ++t) ids[k + t] = t * vocab + samples[i].ids[t];
      if (i % 16 == 0) ids[k + T - 1] = T * vocab + i; // an id the table never holds
    }
    float[] rows = table.lookup(ids);
    for (int i = lo; i < hi; ++i) {
      double s = 0;
      for (int t = 0; t < T; ++t) s += rows[(i - lo) * T + t];
      preds[i] = (float) (1.0 / (1.0 + Math.exp(-s)));
    }
  }
}
