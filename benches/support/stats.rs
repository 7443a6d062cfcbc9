//! Latency statistics shared by the benches.

/// The `p` quantile (0–1) of `v`, nearest rank; sorts `v`.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((p * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)]
}
