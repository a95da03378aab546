/**
 * criteo-synth: the same samples as examples/ctr_train/synth_data.h. The
 * hashes are the C++ ones on long (two's complement wraps like uint64; >>>
 * is the unsigned shift).
 */
final class Synth {
  static final int TABLES = 26;
  static final int DENSE = 13;

  static long mix(long x) { // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15L;
    x = (x ^ (x >>> 30)) * 0xbf58476d1ce4e5b9L;
    x = (x ^ (x >>> 27)) * 0x94d049bb133111ebL;
    return x ^ (x >>> 31);
  }

  static double unit(long h) { return (h >>> 11) * (1.0 / 9007199254740992.0); }

  static double gauss(long h) { // Box-Muller from two hashes
    double u1 = Math.max(unit(h), 1e-300), u2 = unit(mix(h));
    return Math.sqrt(-2.0 * Math.log(u1)) * Math.cos(6.283185307179586 * u2);
  }

  static final class Sample {
    final long[] ids = new long[TABLES];
    float label;
    float plantedProb;
  }

  private final long seed;
  private final long vocab;
  private final double[] cdf; // Zipf(alpha) over ranks 1..vocab

  Synth(long seed, long vocab, double alpha) {
    this.seed = seed;
    this.vocab = vocab;
    cdf = new double[Math.toIntExact(vocab)];
    double s = 0;
    for (int k = 0; k < cdf.length; ++k) cdf[k] = (s += Math.pow(k + 1.0, -alpha));
    for (int k = 0; k < cdf.length; ++k) cdf[k] /= s;
  }

  double weight(int t, long id) {
    return 0.3 * gauss(mix(seed ^ mix(0x5eed0000L + t) ^ mix(id)));
  }

  double denseWeight(int j) { return 0.5 * gauss(mix(seed ^ (0xdeadL + j))); }

  /** First k with cdf[k] >= u (std::lower_bound). */
  private int lowerBound(double u) {
    int lo = 0, hi = cdf.length;
    while (lo < hi) {
      int mid = (lo + hi) >>> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Sample index of split (0 train, 1 held out) into out. */
  void sample(int split, long index, Sample out) {
    long base = mix(seed ^ mix(((long) split << 56) ^ index));
    double logit = -1.0;
    for (int t = 0; t < TABLES; ++t) {
      double u = unit(mix(base + 2L * t + 1));
      long rank = Math.min(lowerBound(u), vocab - 1);
      long id = (rank * 0x9e3779b1L + t * 7919L) & (vocab - 1);
      out.ids[t] = id;
      logit += weight(t, id);
    }
    for (int j = 0; j < DENSE; ++j) {
      float d = (float) gauss(mix(base + 1000 + j));
      logit += denseWeight(j) * d;
    }
    double p = 1.0 / (1.0 + Math.exp(-logit));
    out.plantedProb = (float) p;
    out.label = unit(mix(base + 4242)) < p ? 1.0f : 0.0f;
  }
}
