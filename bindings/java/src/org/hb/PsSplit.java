package org.hb;

/**
 * A split of the job's input handed out by ps task 0 (hb_ps_split): samples
 * (or reader bytes) [begin, end), to be read from {@code from} -- begin, or
 * where an earlier holder's pushes stopped.
 */
public final class PsSplit {
  public final long split, epoch, begin, end, from;

  PsSplit(long[] v) {
    split = v[0];
    epoch = v[1];
    begin = v[2];
    end = v[3];
    from = v[4];
  }

  @Override
  public String toString() {
    return "PsSplit{split=" + split + ", epoch=" + epoch + ", begin=" + begin + ", end=" + end
        + ", from=" + from + "}";
  }
}
