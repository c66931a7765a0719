//! The report's three plots as hand-written SVG: no plotting crate, no font files, so
//! `primd eval` cross-builds for the boards like the rest of primd. Text is left to the
//! viewer's default sans-serif font.

use std::fmt::Write;

use super::metrics::{CADENCES, LATENCIES_MS, PHI_BINS, THETAS};
use super::prefix::PrefixSummary;

const SERIES: [&str; 2] = ["#1f77b4", "#d62728"];

struct Svg {
    buf: String,
}

impl Svg {
    fn new(w: u32, h: u32, title: &str) -> Self {
        let mut buf = String::new();
        let _ = write!(
            buf,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(buf, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        let mut s = Svg { buf };
        s.text(w as f64 / 2.0, 20.0, title, "middle", 14);
        s
    }

    fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str) {
        let _ = write!(
            self.buf,
            r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}"/>"#
        );
    }

    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = write!(
            self.buf,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}"/>"#
        );
    }

    fn text(&mut self, x: f64, y: f64, s: &str, anchor: &str, size: u32) {
        let esc = s
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let _ = write!(
            self.buf,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" font-size="{size}">{esc}</text>"#
        );
    }

    fn polyline(&mut self, pts: &[(f64, f64)], stroke: &str) {
        let mut p = String::new();
        for (x, y) in pts {
            let _ = write!(p, "{x:.1},{y:.1} ");
        }
        let _ = write!(
            self.buf,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="2"/>"#,
            p.trim_end()
        );
    }

    fn legend(&mut self, x: f64, y: f64, names: &[&str]) {
        for (i, name) in names.iter().enumerate() {
            let yy = y + i as f64 * 18.0;
            self.rect(x, yy - 10.0, 12.0, 12.0, SERIES[i % SERIES.len()]);
            self.text(x + 18.0, yy, name, "start", 12);
        }
    }

    fn finish(mut self) -> String {
        self.buf.push_str("</svg>\n");
        self.buf
    }
}

/// Grouped bars of φ distributions (share of each set per 0.1-wide bin).
pub fn phi_histogram(title: &str, series: &[(&str, [usize; PHI_BINS])]) -> String {
    let (w, h) = (640.0, 360.0);
    let (x0, y0, pw, ph) = (60.0, 40.0, 540.0, 260.0);
    let mut s = Svg::new(w as u32, h as u32, title);
    let shares: Vec<Vec<f64>> = series
        .iter()
        .map(|(_, counts)| {
            let total = counts.iter().sum::<usize>().max(1) as f64;
            counts.iter().map(|&c| c as f64 / total).collect()
        })
        .collect();
    let top = shares
        .iter()
        .flatten()
        .fold(0.0f64, |a, &b| a.max(b))
        .max(0.05);
    let top = (top * 10.0).ceil() / 10.0;
    for i in 0..=4 {
        let v = top * i as f64 / 4.0;
        let y = y0 + ph - v / top * ph;
        s.line(x0, y, x0 + pw, y, "#dddddd");
        s.text(x0 - 6.0, y + 4.0, &format!("{:.0}%", v * 100.0), "end", 11);
    }
    let bin_w = pw / PHI_BINS as f64;
    let bar_w = (bin_w - 6.0) / series.len().max(1) as f64;
    for (si, sh) in shares.iter().enumerate() {
        for (b, &v) in sh.iter().enumerate() {
            let bh = v / top * ph;
            let x = x0 + b as f64 * bin_w + 3.0 + si as f64 * bar_w;
            s.rect(x, y0 + ph - bh, bar_w, bh, SERIES[si % SERIES.len()]);
        }
    }
    for b in 0..=PHI_BINS {
        let x = x0 + b as f64 * bin_w;
        s.text(
            x,
            y0 + ph + 16.0,
            &format!("{:.1}", b as f64 / PHI_BINS as f64),
            "middle",
            11,
        );
    }
    s.line(x0, y0 + ph, x0 + pw, y0 + ph, "black");
    s.text(
        x0 + pw / 2.0,
        y0 + ph + 36.0,
        "φ = t*/n (share of the query spoken)",
        "middle",
        12,
    );
    let names: Vec<&str> = series.iter().map(|(n, _)| *n).collect();
    // Top left: φ's mass sits on the right.
    s.legend(x0 + 20.0, y0 + 14.0, &names);
    s.finish()
}

/// Streamable fraction over (L, δ), one panel per θ.
pub fn streamable_heatmap(p: &PrefixSummary) -> String {
    let (cell_w, cell_h) = (80.0, 44.0);
    let panel_w = 90.0 + cell_w * CADENCES.len() as f64;
    let (w, h) = (
        40.0 + panel_w * THETAS.len() as f64,
        90.0 + cell_h * LATENCIES_MS.len() as f64 + 40.0,
    );
    let mut s = Svg::new(
        w as u32,
        h as u32,
        "Streamable fraction (H ≥ θ·L), all queries",
    );
    for (ti, &theta) in THETAS.iter().enumerate() {
        let px = 20.0 + ti as f64 * panel_w + 80.0;
        let py = 70.0;
        s.text(
            px + cell_w * 1.5,
            py - 24.0,
            &format!("θ = {theta}"),
            "middle",
            13,
        );
        for (ci, &d) in CADENCES.iter().enumerate() {
            s.text(
                px + ci as f64 * cell_w + cell_w / 2.0,
                py - 6.0,
                &format!("δ = {d} w/s"),
                "middle",
                11,
            );
        }
        for (li, &l) in LATENCIES_MS.iter().enumerate() {
            let y = py + li as f64 * cell_h;
            s.text(
                px - 6.0,
                y + cell_h / 2.0 + 4.0,
                &format!("L = {l} ms"),
                "end",
                11,
            );
            for (ci, &d) in CADENCES.iter().enumerate() {
                let v = p.cell(l, d, theta).map_or(0.0, |c| c.all);
                // White (0) → dark blue (1).
                let (r, g, b) = (
                    (255.0 - 224.0 * v) as u8,
                    (255.0 - 136.0 * v) as u8,
                    (255.0 - 75.0 * v) as u8,
                );
                let x = px + ci as f64 * cell_w;
                s.rect(
                    x,
                    y,
                    cell_w - 2.0,
                    cell_h - 2.0,
                    &format!("rgb({r},{g},{b})"),
                );
                let ink = if v > 0.55 { "white" } else { "black" };
                let _ = write!(
                    s.buf,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="13" fill="{ink}">{:.1}%</text>"#,
                    x + cell_w / 2.0 - 1.0,
                    y + cell_h / 2.0 + 4.0,
                    v * 100.0
                );
            }
        }
    }
    s.text(
        w / 2.0,
        h - 12.0,
        "t* = t_suf (top-3) on the favourable slice, t_sc elsewhere",
        "middle",
        11,
    );
    s.finish()
}

/// Empirical CDFs of end-of-utterance → results latency, log-scaled milliseconds.
pub fn latency_cdf(title: &str, series: &[(&str, Vec<f64>)]) -> String {
    let (w, h) = (640.0, 360.0);
    let (x0, y0, pw, ph) = (60.0, 40.0, 540.0, 260.0);
    let mut s = Svg::new(w as u32, h as u32, title);
    let all = series.iter().flat_map(|(_, v)| v.iter().copied());
    let (lo, hi) = all.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = if lo.is_finite() && hi > 0.0 {
        (
            10f64.powf(lo.max(1e-4).log10().floor()),
            10f64.powf(hi.log10().ceil()),
        )
    } else {
        (0.01, 100.0)
    };
    let hi = if hi <= lo { lo * 10.0 } else { hi };
    let xof = |v: f64| x0 + (v.max(lo).log10() - lo.log10()) / (hi.log10() - lo.log10()) * pw;
    let yof = |q: f64| y0 + ph - q * ph;
    let mut dec = lo;
    while dec <= hi * 1.0001 {
        let x = xof(dec);
        s.line(x, y0, x, y0 + ph, "#dddddd");
        s.text(x, y0 + ph + 16.0, &format!("{dec}"), "middle", 11);
        dec *= 10.0;
    }
    for i in 0..=4 {
        let q = i as f64 / 4.0;
        s.line(x0, yof(q), x0 + pw, yof(q), "#dddddd");
        s.text(
            x0 - 6.0,
            yof(q) + 4.0,
            &format!("{:.0}%", q * 100.0),
            "end",
            11,
        );
    }
    for (si, (_, values)) in series.iter().enumerate() {
        let mut v = values.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len().max(1) as f64;
        let mut pts = vec![(xof(v.first().copied().unwrap_or(lo)), yof(0.0))];
        for (i, &x) in v.iter().enumerate() {
            pts.push((xof(x), yof(i as f64 / n)));
            pts.push((xof(x), yof((i + 1) as f64 / n)));
        }
        s.polyline(&pts, SERIES[si % SERIES.len()]);
    }
    s.line(x0, y0 + ph, x0 + pw, y0 + ph, "black");
    s.text(
        x0 + pw / 2.0,
        y0 + ph + 36.0,
        "end of utterance → results (ms, log scale)",
        "middle",
        12,
    );
    let names: Vec<&str> = series.iter().map(|(n, _)| *n).collect();
    s.legend(x0 + 20.0, y0 + 14.0, &names);
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_well_formed_svg_with_their_data() {
        let h = phi_histogram(
            "φ",
            &[
                ("a", [1, 0, 0, 0, 0, 0, 0, 0, 0, 3]),
                ("b<&>", [0; PHI_BINS]),
            ],
        );
        assert!(h.starts_with("<svg") && h.trim_end().ends_with("</svg>"));
        assert!(h.contains("b&lt;&amp;&gt;"), "text is escaped");
        // The axis tops at the tallest share rounded up to 10% (75% → 80%), so the 75%
        // bar is 75/80 of the plot's 260 px, and the 25% bar a third of that.
        assert!(h.contains(">80%<"), "{h}");
        assert!(h.contains(r##"height="243.8" fill="#1f77b4""##), "{h}");
        assert!(h.contains(r##"height="81.2" fill="#1f77b4""##), "{h}");
        let c = latency_cdf("lat", &[("x", vec![0.1, 0.2, 10.0]), ("y", vec![])]);
        assert_eq!(c.matches("<polyline").count(), 2);
        assert!(
            c.contains(">0.1<") && c.contains(">10<"),
            "decade ticks: {c}"
        );
    }
}
