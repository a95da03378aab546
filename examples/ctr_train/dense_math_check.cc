// Checks dense_math::gemm (CBLAS when built with it) and gemm_loops against
// a double-precision reference, for the demo's three products and for edge
// cases: an empty batch (K = 0), beta = 0 over garbage, row strides wider
// than the rows, alpha != 1. Exit 0 and "dense_math: ok" when all agree.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dense_math.h"

namespace {

float value(uint64_t i) {  // deterministic, with exact zeros like ReLU's
  uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  return h % 4 == 0 ? 0.0f : static_cast<float>(h % 2001) / 1000.0f - 1.0f;
}

int failures = 0;

void check(const char *name, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
           float alpha, float beta, int64_t pad) {
  // Stored shapes: A is M x K (K x M when ta), B is K x N (N x K when tb).
  int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
  int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  std::vector<float> A(a_rows * lda + 1), B(b_rows * ldb + 1);
  for (size_t i = 0; i < A.size(); ++i) A[i] = value(i);
  for (size_t i = 0; i < B.size(); ++i) B[i] = value(i + 7777);
  std::vector<float> C0(M * ldc);
  for (size_t i = 0; i < C0.size(); ++i)
    C0[i] = beta == 0 ? NAN : value(i + 31);  // beta = 0 ignores C
  for (int impl = 0; impl < 2; ++impl) {
    std::vector<float> C = C0;
    if (impl == 0)
      dense_math::gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb,
                       beta, C.data(), ldc);
    else
      dense_math::gemm_loops(ta, tb, M, N, K, alpha, A.data(), lda, B.data(),
                             ldb, beta, C.data(), ldc);
    double worst = 0;
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double ref = 0;
        for (int64_t k = 0; k < K; ++k)
          ref += static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]) *
                 (tb ? B[j * ldb + k] : B[k * ldb + j]);
        ref *= alpha;
        if (beta != 0) ref += static_cast<double>(beta) * C0[i * ldc + j];
        double err = std::fabs(C[i * ldc + j] - ref) / (1.0 + std::fabs(ref));
        if (!(err <= worst)) worst = err;  // NaN counts as the worst
      }
      // The padding between rows stays as it was.
      for (int64_t j = N; j < ldc && i + 1 < M; ++j)
        if (!(C[i * ldc + j] == C0[i * ldc + j] ||
              (std::isnan(C[i * ldc + j]) && std::isnan(C0[i * ldc + j]))))
          worst = INFINITY;
    }
    const char *impl_name = impl == 0 ? dense_math::gemm_name() : "loops";
    if (!(worst < 1e-5)) {
      std::printf("dense_math: %s (%s): relative error %g\n", name, impl_name,
                  worst);
      ++failures;
    }
  }
}

// OpenBLAS on pre-AVX kernels where the CPU runs AVX2 is the misdetection
// blas_core corrects: a failure unless the user chose that core.
void check_blas_core() {
  const char *want = blas_core::better_core();
  const char *chosen = std::getenv("OPENBLAS_CORETYPE");
  if (want && (!chosen || std::strcmp(chosen, want) == 0)) {
    std::printf(
        "dense_math: OpenBLAS runs %s kernels on a CPU with AVX2 (%s "
        "kernels would fit)\n",
        blas_core::openblas_core(), want);
    ++failures;
  }
}

}  // namespace

int main(int, char **argv) {
  blas_core::rerun_if_misdetected(argv);
  check_blas_core();
  // The demo's products (batch 512, input 221, hidden 64, pooled width 209).
  check("forward z1 = x W1^T + b1", false, true, 512, 64, 221, 1.0f, 1.0f, 0);
  check("gW1 = dz1^T x", true, false, 64, 221, 512, 1.0f, 0.0f, 0);
  check("grad_pooled = dz1 W1[:, :208]", false, false, 512, 208, 64, 1.0f, 0.0f,
        13);
  check("empty batch, beta 0", true, false, 64, 221, 0, 1.0f, 0.0f, 0);
  check("empty batch, beta 1", false, true, 3, 64, 0, 1.0f, 1.0f, 0);
  check("alpha, beta, padding", true, true, 7, 5, 9, -0.5f, 2.0f, 3);
  check("one element", false, false, 1, 1, 1, 1.0f, 0.0f, 0);
  if (failures) return 1;
  std::printf("dense_math: ok (%s and loops)\n", dense_math::gemm_name());
  return 0;
}
