//! How figures are written in the tables and checks: signed milliseconds,
//! optional values, MiB, percentages and ratios ("—" for what was not
//! measured).

use crate::row::f_ms;

/// Milliseconds with their sign (`+1.234`), for overheads.
pub(super) fn f_signed_ms(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", f_ms(v))
    } else {
        f_ms(v)
    }
}

/// `v` with `decimals` places, or "—".
pub(super) fn f_opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "—".into())
}

/// KiB as MiB with one place, or "—".
pub(super) fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1}", k as f64 / 1024.0))
        .unwrap_or_else(|| "—".into())
}

/// `a` as a percentage of `b` (0 when `b` is not positive).
pub(super) fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        100.0 * a / b
    } else {
        0.0
    }
}

/// `a / b` as `1.23×`; a forwarder overhead of zero or less is noise.
pub(super) fn ratio_text(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "forwarder overhead ≤ 0: noise".into()
    }
}
