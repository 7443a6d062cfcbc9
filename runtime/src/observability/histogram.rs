//! A latency histogram with logarithmic buckets: constant memory, quantiles within one
//! bucket's width (a factor of 2^(1/4), about 19%).

/// Bucket boundaries per doubling.
const PER_OCTAVE: f64 = 4.0;
/// The smallest bucket's upper bound, in microseconds.
const FLOOR_US: f64 = 1.0;
/// Buckets: 1 µs to about 1 hour.
const BUCKETS: usize = 130;

/// Counts of latencies by logarithmic bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
    sum_us: f64,
    max_us: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
            sum_us: 0.0,
            max_us: 0.0,
        }
    }
}

fn bucket(us: f64) -> usize {
    if us <= FLOOR_US {
        return 0;
    }
    (((us / FLOOR_US).log2() * PER_OCTAVE).ceil() as usize).min(BUCKETS - 1)
}

fn upper(i: usize) -> f64 {
    FLOOR_US * 2f64.powf(i as f64 / PER_OCTAVE)
}

impl LatencyHistogram {
    /// Adds one latency, in microseconds.
    pub fn record(&mut self, us: f64) {
        let us = us.max(0.0);
        self.counts[bucket(us)] += 1;
        self.total += 1;
        self.sum_us += us;
        self.max_us = self.max_us.max(us);
    }

    /// Latencies recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Their mean, in microseconds (0 when empty).
    pub fn mean_us(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum_us / self.total as f64
        }
    }

    /// The largest, in microseconds.
    pub fn max_us(&self) -> f64 {
        self.max_us
    }

    /// The `q` quantile (0..=1) as its bucket's upper bound, in microseconds (0 when
    /// empty).
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let target = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= target {
                return upper(i).min(self.max_us);
            }
        }
        self.max_us
    }

    /// Non-empty buckets as (upper bound in µs, count).
    pub fn buckets(&self) -> Vec<(f64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, c)| (upper(i), *c))
            .collect()
    }

    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
        self.total += other.total;
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_fall_in_the_right_bucket() {
        let mut h = LatencyHistogram::default();
        for us in 1..=1000 {
            h.record(us as f64);
        }
        assert_eq!(h.count(), 1000);
        assert!((h.mean_us() - 500.5).abs() < 1e-9);
        let p50 = h.quantile_us(0.5);
        assert!((500.0..=500.0 * 1.19).contains(&p50), "p50 {p50}");
        let p99 = h.quantile_us(0.99);
        assert!((990.0..=1000.0).contains(&p99), "p99 {p99}");
        assert_eq!(h.quantile_us(1.0), 1000.0);
        assert_eq!(LatencyHistogram::default().quantile_us(0.5), 0.0);
        let mut g = LatencyHistogram::default();
        g.record(5e6);
        h.merge(&g);
        assert_eq!(h.count(), 1001);
        assert_eq!(h.max_us(), 5e6);
    }
}
