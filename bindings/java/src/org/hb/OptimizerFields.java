package org.hb;

/**
 * The optimizer fields of a config (EmbeddingConfig, PsDenseConfig keep one
 * each; their public setters stay their own, so compiled callers keep
 * linking): hb.h's defaults of that config, written into its native copy.
 */
final class OptimizerFields {
  int optimizer;
  double learningRate, initialAccumulator, beta1, beta2, epsilon, l1, l2, lrPower;

  OptimizerFields(OptimizerNative defaults) {
    optimizer = defaults.getOptimizer();
    learningRate = defaults.getLearning_rate();
    initialAccumulator = defaults.getInitial_accumulator();
    beta1 = defaults.getBeta1();
    beta2 = defaults.getBeta2();
    epsilon = defaults.getEpsilon();
    l1 = defaults.getL1();
    l2 = defaults.getL2();
    lrPower = defaults.getLr_power();
  }

  void optimizer(int v, double lr) {
    optimizer = v;
    learningRate = lr;
  }

  void adam(double b1, double b2, double eps) {
    beta1 = b1;
    beta2 = b2;
    epsilon = eps;
  }

  void ftrl(double l1v, double l2v, double power) {
    l1 = l1v;
    l2 = l2v;
    lrPower = power;
  }

  void applyTo(OptimizerNative c) {
    c.setOptimizer(optimizer);
    c.setLearning_rate(learningRate);
    c.setInitial_accumulator(initialAccumulator);
    c.setBeta1(beta1);
    c.setBeta2(beta2);
    c.setEpsilon(epsilon);
    c.setL1(l1);
    c.setL2(l2);
    c.setLr_power(lrPower);
  }
}
