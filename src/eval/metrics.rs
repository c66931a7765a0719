//! The measures of the stabilisation study, as pure functions over per-prefix results.
//!
//! Definitions (seeds/002, "Core Definitions"), for a query of `n` words whose prefix
//! `q(1:t)` was retrieved for every `t` in `1..=n`:
//! - `t_sc`: the smallest `t` after which the top-1 never changes up to the full query;
//! - `t_suf` at `k`: the smallest `t` with a relevant passage in the top-`k`;
//! - `φ = t*/n` for either;
//! - `H(L, δ) = min(L, max(0, (n − t*)/δ))`: the part of a tool latency `L` that can be
//!   hidden behind the words still to be spoken at `δ` words per second;
//! - a query is *streamable* at `θ` when `H ≥ θ·L`.
//!
//! Kept free of I/O and of the retriever so each can be checked on hand-computed examples.

use serde::Serialize;

/// The k of `t_suf` the study reports (1, 3, 5, 10).
pub const KS: [usize; 4] = [1, 3, 5, 10];
/// The k of the study's headline (mean φ_suf 0.26 at top-3) and of the streamable split.
pub const HEADLINE_K: usize = 3;
/// Tool latencies L of the streamable grid, milliseconds.
pub const LATENCIES_MS: [f64; 3] = [200.0, 600.0, 1000.0];
/// Input cadences δ of the grid, words per second.
pub const CADENCES: [f64; 3] = [2.0, 3.0, 4.0];
/// Coverage thresholds θ of the grid.
pub const THETAS: [f64; 2] = [0.5, 0.8];
/// Bins of a φ histogram: [0, 0.1), [0.1, 0.2), …, [0.9, 1.0].
pub const PHI_BINS: usize = 10;

/// `t_sc` from the top-1 at each prefix (`top1[t - 1]`, `None` when nothing came back).
/// `None` for an empty query.
pub fn t_sc<T: PartialEq>(top1: &[T]) -> Option<usize> {
    let last = top1.last()?;
    let mut t = top1.len();
    while t > 1 && top1[t - 2] == *last {
        t -= 1;
    }
    Some(t)
}

/// `t_suf` at `k` from the best rank (0-based) of a relevant passage at each prefix
/// (`ranks[t - 1]`, `None` when no relevant passage was retrieved). `None` when a
/// relevant passage never reaches the top-`k`.
pub fn t_suf(ranks: &[Option<usize>], k: usize) -> Option<usize> {
    ranks
        .iter()
        .position(|r| r.is_some_and(|r| r < k))
        .map(|i| i + 1)
}

/// `φ = t/n`.
pub fn phi(t: usize, n: usize) -> f64 {
    t as f64 / n as f64
}

/// `H(L, δ)` in milliseconds for a query of `n` words stabilised at `t`.
pub fn hidden_ms(n: usize, t: usize, latency_ms: f64, cadence_wps: f64) -> f64 {
    let remaining_ms = (n as f64 - t as f64) / cadence_wps * 1000.0;
    remaining_ms.max(0.0).min(latency_ms)
}

/// `H ≥ θ·L` (with a tolerance of a nanosecond for the float product).
pub fn streamable(hidden_ms: f64, latency_ms: f64, theta: f64) -> bool {
    hidden_ms >= theta * latency_ms - 1e-6
}

/// Arithmetic mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Median (mean of the two middle values for an even count); `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Percentile `p` (0..=100) of values already sorted ascending, by linear interpolation
/// between the closest ranks (numpy's default); `None` for no values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let pos = p.clamp(0.0, 100.0) / 100.0 * (n - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

/// Counts of φ values per bin of width 0.1 ([0.9, 1.0] closed).
pub fn phi_histogram(values: &[f64]) -> [usize; PHI_BINS] {
    let mut h = [0; PHI_BINS];
    for &v in values {
        // Multiply with a hair of slack so that 0.3 (= 3/10 in floats) lands in [0.3, 0.4).
        let bin = ((v * PHI_BINS as f64) + 1e-9)
            .floor()
            .clamp(0.0, (PHI_BINS - 1) as f64);
        h[bin as usize] += 1;
    }
    h
}

/// Mean, median and histogram of a set of φ.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PhiDist {
    pub count: usize,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub histogram: [usize; PHI_BINS],
}

impl PhiDist {
    pub fn of(values: &[f64]) -> Self {
        PhiDist {
            count: values.len(),
            mean: mean(values),
            median: median(values),
            histogram: phi_histogram(values),
        }
    }
}

/// A question's type, from its first word (RQ4 of the study).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QType {
    Who,
    What,
    When,
    Where,
    Which,
    How,
    Why,
    Other,
}

impl QType {
    pub const ALL: [QType; 8] = [
        QType::Who,
        QType::What,
        QType::When,
        QType::Where,
        QType::Which,
        QType::How,
        QType::Why,
        QType::Other,
    ];

    /// From the first word of the question (case and punctuation ignored).
    pub fn of(question: &str) -> Self {
        let first = question
            .split(|c: char| !c.is_alphanumeric())
            .find(|w| !w.is_empty())
            .unwrap_or("")
            .to_lowercase();
        match first.as_str() {
            "who" => QType::Who,
            "what" => QType::What,
            "when" => QType::When,
            "where" => QType::Where,
            "which" => QType::Which,
            "how" => QType::How,
            "why" => QType::Why,
            _ => QType::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QType::Who => "who",
            QType::What => "what",
            QType::When => "when",
            QType::Where => "where",
            QType::Which => "which",
            QType::How => "how",
            QType::Why => "why",
            QType::Other => "other",
        }
    }
}

/// Pareto front of points to minimise on `cost` and `latency` and maximise on `quality`:
/// the indices of the points no other point is at least as good as on all three and
/// better on one. In input order.
pub fn pareto_front(points: &[(f64, f64, f64)]) -> Vec<usize> {
    let dominates = |a: &(f64, f64, f64), b: &(f64, f64, f64)| {
        a.0 <= b.0 && a.1 >= b.1 && a.2 <= b.2 && (a.0 < b.0 || a.1 > b.1 || a.2 < b.2)
    };
    (0..points.len())
        .filter(|&i| !points.iter().any(|p| dominates(p, &points[i])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_sc_is_where_the_top1_stops_changing() {
        assert_eq!(t_sc(&[7, 7, 7]), Some(1), "never changes");
        assert_eq!(t_sc(&[1, 2, 3, 3]), Some(3));
        assert_eq!(
            t_sc(&[5, 9, 5, 5]),
            Some(3),
            "an earlier visit does not count"
        );
        assert_eq!(t_sc(&[1, 2, 3]), Some(3), "changes at the last word");
        assert_eq!(t_sc(&[None, Some(4), Some(4)]), Some(2));
        assert_eq!(t_sc::<u32>(&[]), None);
    }

    #[test]
    fn t_suf_is_the_first_prefix_with_a_relevant_passage_in_the_top_k() {
        let ranks = [None, Some(4), Some(2), Some(0), Some(5)];
        assert_eq!(t_suf(&ranks, 1), Some(4));
        assert_eq!(t_suf(&ranks, 3), Some(3));
        assert_eq!(t_suf(&ranks, 5), Some(2));
        assert_eq!(t_suf(&ranks, 10), Some(2));
        assert_eq!(t_suf(&[None, Some(3)], 3), None);
        assert_eq!(t_suf(&[], 3), None);
    }

    #[test]
    fn hidden_latency_bound_by_hand() {
        // 10 words, stabilised at 4: 6 words left at 3 w/s = 2000 ms of speech left.
        assert_eq!(hidden_ms(10, 4, 600.0, 3.0), 600.0);
        assert_eq!(hidden_ms(10, 4, 3000.0, 3.0), 2000.0);
        // 1 word left at 2 w/s = 500 ms: hides 500 of 600 ms (0.83 ≥ 0.8), not of 1000.
        let h = hidden_ms(8, 7, 600.0, 2.0);
        assert_eq!(h, 500.0);
        assert!(streamable(h, 600.0, 0.8));
        assert!(!streamable(hidden_ms(8, 7, 1000.0, 2.0), 1000.0, 0.8));
        assert!(streamable(hidden_ms(8, 7, 1000.0, 2.0), 1000.0, 0.5));
        // Stabilised at the last word: nothing to hide.
        assert_eq!(hidden_ms(5, 5, 600.0, 3.0), 0.0);
        assert!(!streamable(0.0, 600.0, 0.5));
        // Exactly θ·L counts: 2 words at 4 w/s = 500 ms of 1000 at θ = 0.5.
        assert!(streamable(hidden_ms(6, 4, 1000.0, 4.0), 1000.0, 0.5));
        // Slower cadence hides more when L is large (the study's "cadence effect").
        assert!(hidden_ms(6, 4, 1000.0, 2.0) > hidden_ms(6, 4, 1000.0, 4.0));
        assert_eq!(phi(3, 12), 0.25);
    }

    #[test]
    fn summaries_by_hand() {
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(median(&[6.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!((mean(&[]), median(&[])), (None, None));
        let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&sorted, 50.0), Some(3.0));
        assert_eq!(percentile(&sorted, 90.0), Some(4.6));
        assert_eq!(percentile(&sorted, 0.0), Some(1.0));
        assert_eq!(percentile(&sorted, 100.0), Some(5.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        let h = phi_histogram(&[0.05, 0.1, 0.3, 1.0 / 3.0, 0.95, 1.0, 1.0]);
        assert_eq!(h, [1, 1, 0, 2, 0, 0, 0, 0, 0, 3]);
        let d = PhiDist::of(&[0.25, 0.5, 1.0]);
        assert_eq!((d.count, d.median), (3, Some(0.5)));
    }

    #[test]
    fn question_types_from_the_first_word() {
        assert_eq!(QType::of("Who wrote Hamlet?"), QType::Who);
        assert_eq!(QType::of("  what's this"), QType::What);
        assert_eq!(QType::of("\"When did it end?"), QType::When);
        assert_eq!(QType::of("HOW many"), QType::How);
        assert_eq!(QType::of("In which year"), QType::Other);
        assert_eq!(QType::of(""), QType::Other);
    }

    #[test]
    fn pareto_front_keeps_only_undominated_points() {
        // (searches per utterance, hit@10, p50 ms)
        let pts = [
            (4.0, 0.70, 0.2), // 0: dominated by 1 (dearer, same quality and p50)
            (2.0, 0.70, 0.2), // 1: front
            (1.0, 0.60, 0.5), // 2: front (cheapest)
            (2.0, 0.65, 0.3), // 3: dominated by 1
            (5.0, 0.72, 0.9), // 4: front (best quality)
        ];
        assert_eq!(pareto_front(&pts), vec![1, 2, 4]);
    }
}
