//! The 1×1×1 SGEMM of the tiny round trips (`sgemm.rs`, `phases.rs`): raw cuBLAS's side.
#![allow(dead_code)]

use cudarc::cublas::{sys as cbsys, GemmConfig};

/// C = A·B for 1-element column-major A, B and C.
pub fn config() -> GemmConfig<f32> {
    GemmConfig {
        transa: cbsys::cublasOperation_t::CUBLAS_OP_N,
        transb: cbsys::cublasOperation_t::CUBLAS_OP_N,
        m: 1,
        n: 1,
        k: 1,
        alpha: 1.0,
        lda: 1,
        ldb: 1,
        beta: 0.0,
        ldc: 1,
    }
}
