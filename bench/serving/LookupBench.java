import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import org.hb.Embedding;

/**
 * The Java lines of bench/serving/lookup_compare.sh: one thread's lookups
 * on an exported table through the Java binding, with serving_bench's id
 * stream (xorshift64, 65536 ids, BATCH copied in bulk per call), on arrays
 * or on direct buffers, for SECONDS of the thread's CPU time (the rate
 * counts what a call costs, not what other processes on a shared machine
 * take).
 *
 * <pre>java LookupBench PATH BATCH SECONDS arrays|direct -> calls/s x ids/s y</pre>
 */
public final class LookupBench {
  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: LookupBench PATH BATCH SECONDS arrays|direct");
      System.exit(2);
    }
    int batch = Integer.parseInt(args[1]);
    double secs = Double.parseDouble(args[2]);
    boolean direct = args[3].equals("direct");
    try (Embedding s = Embedding.open(args[0])) {
      long rows = s.localRows();
      // A call's ids are one slice of the stream, copied in bulk: the
      // stream repeats its start past the end.
      long[] stream = new long[65536 + batch];
      long x = 88172645463325252L;
      for (int i = 0; i < 65536; ++i) {
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        stream[i] = Long.remainderUnsigned(x, rows);
      }
      for (int i = 65536; i < stream.length; ++i) stream[i] = stream[i & 65535];
      int dim = (int) s.dim();
      long[] ids = new long[batch];
      float[] out = new float[batch * dim];
      ByteBuffer bids = ByteBuffer.allocateDirect(8 * batch).order(ByteOrder.nativeOrder());
      ByteBuffer bout = ByteBuffer.allocateDirect(4 * batch * dim).order(ByteOrder.nativeOrder());
      LongBuffer lids = bids.asLongBuffer();
      int at = 0;
      long calls = 0;
      ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
      long t0 = cpu.getCurrentThreadCpuTime();
      double el;
      for (;;) {
        for (int k = 0; k < 1024; ++k) {
          if (direct) {
            lids.put(0, stream, at, batch);
            s.lookup(bids, bout);
          } else {
            System.arraycopy(stream, at, ids, 0, batch);
            s.lookup(ids, out);
          }
          at = (at + batch) & 65535;
        }
        calls += 1024;
        if ((el = (cpu.getCurrentThreadCpuTime() - t0) * 1e-9) >= secs) break;
      }
      System.out.printf("calls/s %.0f ids/s %.0f%n", calls / el, calls * batch / el);
    }
  }
}
