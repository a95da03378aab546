package org.hb;

import java.util.Random;

/** References computed here, independently of libhb. */
final class Reference {
  private Reference() {}

  /** ROC AUC over every (positive, negative) pair; ties count one half. */
  static double exactAuc(float[] labels, float[] preds, float[] weights) {
    double num = 0, den = 0;
    for (int i = 0; i < labels.length; ++i) {
      if (labels[i] <= 0.5f) continue;
      for (int j = 0; j < labels.length; ++j) {
        if (labels[j] > 0.5f) continue;
        double w = (double) weights[i] * weights[j];
        num += w * (preds[i] > preds[j] ? 1.0 : preds[i] == preds[j] ? 0.5 : 0.0);
        den += w;
      }
    }
    return num / den;
  }

  /** {labels, preds (with ties), weights}, the same on every rank. */
  static float[][] samples(int n, long seed) {
    Random rng = new Random(seed);
    float[] labels = new float[n], preds = new float[n], weights = new float[n];
    for (int i = 0; i < n; ++i) {
      labels[i] = rng.nextDouble() < 0.3 ? 1f : 0f;
      preds[i] = Math.round((rng.nextDouble() * 0.5 + labels[i] * 0.3) * 100) / 100f;
      weights[i] = 1 + rng.nextInt(3);
    }
    return new float[][] {labels, preds, weights};
  }

  /** Every stride-th element from start. */
  static float[] slice(float[] a, int start, int stride) {
    float[] out = new float[(a.length - start + stride - 1) / stride];
    for (int i = 0; i < out.length; ++i) out[i] = a[start + i * stride];
    return out;
  }
}
