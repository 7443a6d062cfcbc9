//! A small SVG plot of latency distributions: the empirical CDF of each series on a
//! logarithmic time axis — where medians and tails of several paths compare at a glance.

use std::fmt::Write;

const W: f64 = 720.0;
const H: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// An SVG document plotting the CDF of each `(label, latencies in µs)` series. Empty
/// series are listed in the legend and not drawn.
pub fn svg_latency_plot(title: &str, series: &[(&str, &[f64])]) -> String {
    let all = series.iter().flat_map(|(_, v)| v.iter().copied()).filter(|v| *v > 0.0);
    let (lo, hi) = all.fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() {
        (lo, hi.max(lo * 1.01))
    } else {
        (1.0, 10.0)
    };
    let (l0, l1) = (lo.log10().floor(), hi.log10().ceil());
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let x = |us: f64| LEFT + (us.max(lo).log10() - l0) / (l1 - l0) * pw;
    let y = |q: f64| TOP + (1.0 - q) * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        escape(title)
    );
    // Axes, decade ticks and quartile grid lines.
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let mut d = l0;
    while d <= l1 + 1e-9 {
        let xv = x(10f64.powf(d));
        let label = match d as i32 {
            e if e >= 6 => format!("{} s", 10f64.powi(e - 6)),
            e if e >= 3 => format!("{} ms", 10f64.powi(e - 3)),
            e => format!("{} µs", 10f64.powi(e)),
        };
        let _ = write!(
            s,
            r##"<line x1="{xv}" y1="{TOP}" x2="{xv}" y2="{}" stroke="#ddd"/><text x="{xv}" y="{}" text-anchor="middle">{label}</text>"##,
            TOP + ph,
            TOP + ph + 18.0
        );
        d += 1.0;
    }
    for q in [0.25, 0.5, 0.75, 0.99] {
        let yv = y(q);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{yv}" x2="{}" y2="{yv}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">p{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            yv + 4.0,
            (q * 100.0) as u32
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">latency (log scale)</text>"#,
        LEFT + pw / 2.0,
        H - 10.0
    );
    for (i, (label, values)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        if !v.is_empty() {
            let n = v.len() as f64;
            // At most ~500 points per curve (evenly spaced ranks, and the last).
            let step = (v.len() / 500).max(1);
            let points: Vec<String> = v
                .iter()
                .enumerate()
                .filter(|(k, _)| k % step == 0 || *k == v.len() - 1)
                .map(|(k, us)| format!("{:.1},{:.1}", x(*us), y((k + 1) as f64 / n)))
                .collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
                points.join(" ")
            );
        }
        let ly = TOP + 16.0 + i as f64 * 20.0;
        let median = v
            .get(v.len() / 2)
            .map(|m| format!(" (p50 {m:.1} µs)"))
            .unwrap_or_default();
        let _ = write!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{}" y="{}">{}{}</text>"#,
            W - RIGHT + 12.0,
            W - RIGHT + 32.0,
            W - RIGHT + 38.0,
            ly + 4.0,
            escape(label),
            escape(&median)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_every_series_as_a_polyline() {
        let a: Vec<f64> = (1..=100).map(|i| i as f64).collect();
        let b: Vec<f64> = (1..=50).map(|i| 10.0 * i as f64).collect();
        let svg = svg_latency_plot("round trip <tiny>", &[("raw", &a), ("actor", &b), ("none", &[])]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("round trip &lt;tiny&gt;"));
        assert!(svg.contains("p50 51.0 µs") && svg.contains("none"));
    }
}
