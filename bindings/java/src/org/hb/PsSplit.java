package org.hb;

/**
 * A split of the job's input handed out by ps task 0 (hb_ps_split): samples
 * (or reader bytes) [begin, end), to be read from {@code from} -- begin, or
 * where an earlier holder's pushes stopped.
 */
public final class PsSplit {
  public final long split, epoch, begin, end, from;
  /** Greater than from: the first batch must end here (hb_ps_split.replay_end). */
  public final long replayEnd;

  /** v: hbw_ps_split_next's six values, in hb_ps_split's order. */
  PsSplit(long[] v) {
    this.split = v[0];
    this.epoch = v[1];
    this.begin = v[2];
    this.end = v[3];
    this.from = v[4];
    this.replayEnd = v[5];
  }

  @Override
  public String toString() {
    return "PsSplit{split=" + split + ", epoch=" + epoch + ", begin=" + begin + ", end=" + end
        + ", from=" + from + ", replayEnd=" + replayEnd + "}";
  }
}
