package org.hb;

/** A failed hb call: the hb_status code, its name and hb_last_error() of that call. */
public class HbException extends Exception {
  private static final long serialVersionUID = 1L;
  private final int status;
  private final String statusName;
  private final String detail;

  HbException(int status, String statusName, String detail) {
    super(statusName + ": " + detail);
    this.status = status;
    this.statusName = statusName;
    this.detail = detail;
  }

  /** The status code, one of Hb.HB_ERR_*. */
  public int status() { return status; }

  /** The status's constant name, e.g. "HB_ERR_TIMEOUT". */
  public String statusName() { return statusName; }

  /** What was wrong (hb_last_error() of the failing call). */
  public String detail() { return detail; }
}
