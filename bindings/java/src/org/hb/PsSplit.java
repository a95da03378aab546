package org.hb;

/**
 * A split of the job's input handed out by ps task 0 (hb_ps_split): samples
 * (or reader bytes) [begin, end), to be read from {@code from} -- begin, or
 * where an earlier holder's pushes stopped.
 */
public final class PsSplit {
  public final long split, epoch, begin, end, from;

  /** v: hbw_ps_split_next's five values, in hb_ps_split's order. */
  PsSplit(long[] v) {
    this(v[0], v[1], v[2], v[3], v[4]);
  }

  private PsSplit(long split, long epoch, long begin, long end, long from) {
    this.split = split;
    this.epoch = epoch;
    this.begin = begin;
    this.end = end;
    this.from = from;
  }

  @Override
  public String toString() {
    return "PsSplit{split=" + split + ", epoch=" + epoch + ", begin=" + begin + ", end=" + end
        + ", from=" + from + "}";
  }
}
