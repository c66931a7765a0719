//! Choosing a kernel set at run time, shared by every module with SIMD kernels (`scan`,
//! `qgemm`, `lexical::kernels`): each lists the sets this CPU supports, best last, and
//! keeps the chosen one in a `OnceLock`, so the hot path has no lock and no feature check.
//! One rule for all of them, so `PRIMD_FORCE_SCALAR=1` (for A/B runs and bug reports)
//! means the same everywhere.

/// The set to use: `scalar` when `PRIMD_FORCE_SCALAR=1`, else the best of `supported`
/// (best last), else `scalar`. Read once per kernel family, at its first use.
pub(crate) fn choose<K: Copy>(scalar: K, supported: &[K]) -> K {
    if std::env::var_os("PRIMD_FORCE_SCALAR").is_some_and(|v| v == "1") {
        scalar
    } else {
        supported.last().copied().unwrap_or(scalar)
    }
}
