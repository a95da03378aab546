import java.io.File;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.hb.Context;
import org.hb.Embedding;
import org.hb.EmbeddingConfig;
import org.hb.Hb;
import org.hb.HbException;
import org.hb.Metric;
import org.hb.MetricConfig;

/**
 * Hot swapping from Java: a trainer thread trains the wide model (26
 * embedding rows of dim 1 per sample, logistic loss) and every STEPS
 * batches writes the next version into DIR as a delta
 * ({@code exportVersion(path, v, v - 1)}); the main thread applies each one
 * to a serving table ({@code update}) while scoring threads keep looking up
 * held-out samples. Every lookup returns the version it read: a scorer's
 * versions never go back, and the held-out AUC improves version by
 * version. Trainer and server share only the files in DIR, as two
 * processes would.
 *
 * <pre>
 *   java -Djava.library.path=DIR -cp hb.jar:. HotSwap DIR SEED VOCAB SAMPLES THREADS VERSIONS STEPS
 * </pre>
 */
public final class HotSwap {
  private static final int BATCH = 64;
  private static final int T = Synth.TABLES;

  private static String path(File dir, long v) { return new File(dir, "wide.v" + v + ".hbe").getPath(); }

  private static double sigmoid(double z) { return 1 / (1 + Math.exp(-z)); }

  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println("usage: HotSwap DIR SEED VOCAB SAMPLES THREADS VERSIONS STEPS");
      System.exit(2);
    }
    File dir = new File(args[0]);
    long seed = Long.parseUnsignedLong(args[1]);
    long vocab = Long.parseLong(args[2]);
    int n = Integer.parseInt(args[3]), threads = Integer.parseInt(args[4]);
    int versions = Integer.parseInt(args[5]), steps = Integer.parseInt(args[6]);
    if (!dir.isDirectory() && !dir.mkdirs()) throw new IllegalStateException("cannot create " + dir);
    try (Context ctx = Context.create();
         Embedding train = Embedding.create(ctx, new EmbeddingConfig("wide", 1).optimizer(Hb.HB_OPT_ADAGRAD, 0.1))) {
      train.exportVersion(path(dir, 1), 1, 0);
      try (Embedding serve = Embedding.open(path(dir, 1))) {
        run(dir, train, serve, new Synth(seed, vocab, 1.1), vocab, n, threads, versions, steps);
      }
    } catch (HbException e) {
      System.err.println("HotSwap: " + e.statusName() + ": " + e.detail());
      System.exit(1);
    }
  }

  private static void run(File dir, Embedding train, Embedding serve, Synth gen, long vocab, int n,
                          int threads, int versions, int steps) throws Exception {
    Synth.Sample[] held = new Synth.Sample[n];
    for (int i = 0; i < n; ++i) {
      held[i] = new Synth.Sample();
      gen.sample(1, i, held[i]);
    }

    // Scorers: held-out batches, one lookup each, until the last version.
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong lookups = new AtomicLong(), backwards = new AtomicLong();
    Thread[] scorers = new Thread[threads];
    for (int w = 0; w < threads; ++w) {
      final int first = w * BATCH;
      scorers[w] = new Thread(() -> {
        long[] ids = new long[BATCH * T];
        float[] rows = new float[BATCH * T];
        long last = 0;
        try {
          for (int i = first; !stop.get(); i = (i + threads * BATCH) % (n - BATCH)) {
            for (int k = 0; k < BATCH; ++k) {
              for (int t = 0; t < T; ++t) ids[k * T + t] = t * vocab + held[i + k].ids[t];
            }
            long v = serve.lookup(ids, rows);
            if (v < last) backwards.incrementAndGet();
            last = v;
            lookups.incrementAndGet();
          }
        } catch (HbException e) {
          backwards.incrementAndGet();
        }
      });
      scorers[w].start();
    }

    // Trainer -> files -> this thread.
    BlockingQueue<Long> ready = new LinkedBlockingQueue<>();
    Exception[] trainError = new Exception[1];
    Thread trainer = new Thread(() -> {
      Synth.Sample s = new Synth.Sample();
      long[] ids = new long[BATCH * T];
      float[] rows = new float[BATCH * T], grads = new float[BATCH * T];
      float[] labels = new float[BATCH];
      long next = 0;
      try {
        for (long v = 2; v <= versions; ++v) {
          for (int st = 0; st < steps; ++st) {
            for (int k = 0; k < BATCH; ++k) {
              gen.sample(0, next++, s);
              labels[k] = s.label;
              for (int t = 0; t < T; ++t) ids[k * T + t] = t * vocab + s.ids[t];
            }
            train.lookup(ids, rows);
            for (int k = 0; k < BATCH; ++k) {
              double z = 0;
              for (int t = 0; t < T; ++t) z += rows[k * T + t];
              float g = ((float) sigmoid(z) - labels[k]) / BATCH; // d logloss / d logit
              for (int t = 0; t < T; ++t) grads[k * T + t] = g;
            }
            train.applyGradients(ids, grads);
          }
          train.exportVersion(path(dir, v), v, v - 1);
          ready.put(v);
        }
      } catch (Exception e) {
        trainError[0] = e;
      } finally {
        ready.add(-1L);
      }
    });
    trainer.start();

    double firstAuc = auc(serve, held, vocab), finalAuc = firstAuc;
    System.out.printf("version 1: %d rows, held-out AUC %.4f%n", serve.localRows(), firstAuc);
    for (long v; (v = ready.take()) > 0; ) {
      long t0 = System.nanoTime();
      serve.update(path(dir, v));
      double ms = (System.nanoTime() - t0) * 1e-6;
      finalAuc = auc(serve, held, vocab);
      System.out.printf("version %d: applied in %.2f ms while %d threads looked up, %d rows, held-out AUC %.4f%n",
                        serve.version(), ms, threads, serve.localRows(), finalAuc);
    }
    stop.set(true);
    for (Thread t : scorers) t.join();
    trainer.join();
    if (trainError[0] != null) throw trainError[0];
    if (backwards.get() != 0) {
      throw new IllegalStateException(backwards.get() + " lookups failed or read an older version than the one before");
    }
    System.out.printf("hot swap: %d versions served, %d lookups during the swaps, versions never went back; "
                      + "AUC %.4f -> %.4f%n", serve.version(), lookups.get(), firstAuc, finalAuc);
  }

  /** Exact AUC of the served version on the held-out samples. */
  private static double auc(Embedding serve, Synth.Sample[] held, long vocab) throws HbException {
    long[] ids = new long[T];
    float[] rows = new float[T];
    float[] labels = new float[held.length], preds = new float[held.length];
    for (int i = 0; i < held.length; ++i) {
      for (int t = 0; t < T; ++t) ids[t] = t * vocab + held[i].ids[t];
      serve.lookup(ids, rows);
      double z = 0;
      for (float r : rows) z += r;
      labels[i] = held[i].label;
      preds[i] = (float) sigmoid(z);
    }
    try (Metric m = Metric.create(null, new MetricConfig(Hb.HB_METRIC_AUC_EXACT))) {
      m.update(labels, preds, null);
      return m.result();
    }
  }
}
