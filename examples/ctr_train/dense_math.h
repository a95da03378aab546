// Matrix products for the demo's MLP: single-precision GEMM on row-major
// matrices, C = alpha * op(A) * op(B) + beta * C, with op(X) = X or X^T.
//
// With HB_CTR_CBLAS (CMake found cblas.h and a BLAS with cblas_sgemm) this is
// cblas_sgemm; linked against Debian's generic libblas.so, so at run time the
// libblas.so.3 alternative (OpenBLAS, BLIS, netlib) does the work. Without
// it, gemm_loops: loop orders whose inner loop runs over contiguous rows of
// B and C with no reduction, so the compiler vectorizes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blas_core.h"

#ifdef HB_CTR_CBLAS
#include <cblas.h>
#endif

namespace dense_math {

// op(A) is M x K, op(B) is K x N, C is M x N; lda, ldb, ldc are the row
// strides of A, B, C as stored.
inline void gemm_loops(bool trans_a, bool trans_b, int64_t M, int64_t N,
                       int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C,
                       int64_t ldc) {
  // B^T is transposed once into scratch so that the inner loop reads rows.
  static thread_local std::vector<float> bt;
  if (trans_b) {
    bt.resize(static_cast<size_t>(K * N));
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) bt[k * N + j] = B[j * ldb + k];
    B = bt.data(), ldb = N;
  }
  for (int64_t i = 0; i < M; ++i) {
    float *__restrict c = C + i * ldc;
    for (int64_t j = 0; j < N; ++j) c[j] = beta == 0 ? 0.0f : beta * c[j];
    for (int64_t k = 0; k < K; ++k) {
      float a = trans_a ? A[k * lda + i] : A[i * lda + k];
      if (a == 0) continue;  // ReLU gradients are half zeros
      a *= alpha;
      const float *__restrict b = B + k * ldb;
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}

inline void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                 float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // an empty batch: C = beta * C (BLAS argument checks aside)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = beta == 0 ? 0.0f : beta * C[i * ldc + j];
    return;
  }
#ifdef HB_CTR_CBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(ldc));
#else
  gemm_loops(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

// Which implementation gemm() is, for the demo's banner ("cblas_sgemm,
// OpenBLAS SkylakeX" names the kernels OpenBLAS chose).
inline const char *gemm_name() {
#ifdef HB_CTR_CBLAS
  static const std::string name =
      blas_core::openblas_core()
          ? std::string("cblas_sgemm, OpenBLAS ") + blas_core::openblas_core()
          : std::string("cblas_sgemm");
  return name.c_str();
#else
  return "loops";
#endif
}

}  // namespace dense_math
