package org.hb;

/** Counters of the ps tasks (hb_ps_stats; summed, maxStaleness the largest). */
public final class PsStats {
  /** Pull and push requests, per table and ps task. */
  public final long pulls, pushes;
  public final long rowsPulled, rowsPushed;
  /** Staleness 0: optimizer rounds. */
  public final long rounds;
  /** The largest lead of a pushing worker over the slowest live one. */
  public final long maxStaleness;
  /** Pushes past the bound (always 0). */
  public final long boundViolations;
  /** Replayed steps dropped. */
  public final long duplicatePushes;
  public final long workersLost, workersRejoined;
  /** Time the ps tasks spent serving, in microseconds. */
  public final long busyUs;
  /** Workers that have left (destroyed their context) every ps task. */
  public final long workersLeft;
  /** Workers that have left or are lost on every ps task, now. */
  public final long workersGone;

  PsStats(long[] v) {
    pulls = v[0];
    pushes = v[1];
    rowsPulled = v[2];
    rowsPushed = v[3];
    rounds = v[4];
    maxStaleness = v[5];
    boundViolations = v[6];
    duplicatePushes = v[7];
    workersLost = v[8];
    workersRejoined = v[9];
    busyUs = v[10];
    workersLeft = v[11];
    workersGone = v[12];
  }

  @Override
  public String toString() {
    return "PsStats{pulls=" + pulls + ", pushes=" + pushes + ", rowsPulled=" + rowsPulled
        + ", rowsPushed=" + rowsPushed + ", rounds=" + rounds + ", maxStaleness=" + maxStaleness
        + ", boundViolations=" + boundViolations + ", duplicatePushes=" + duplicatePushes
        + ", workersLost=" + workersLost + ", workersRejoined=" + workersRejoined + ", busyUs=" + busyUs
        + ", workersLeft=" + workersLeft + ", workersGone=" + workersGone + "}";
  }
}
