package org.hb;

/** The optimizer fields of the native configs that have one (hb_embedding_config, hb_ps_dense_config). */
interface OptimizerNative {
  int getOptimizer();
  double getLearning_rate();
  double getInitial_accumulator();
  double getBeta1();
  double getBeta2();
  double getEpsilon();
  double getL1();
  double getL2();
  double getLr_power();
  void setOptimizer(int v);
  void setLearning_rate(double v);
  void setInitial_accumulator(double v);
  void setBeta1(double v);
  void setBeta2(double v);
  void setEpsilon(double v);
  void setL1(double v);
  void setL2(double v);
  void setLr_power(double v);
}
