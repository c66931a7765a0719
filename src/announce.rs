//! What primd says at the default log level, besides warnings and errors: one line per
//! listener (`listening on unix:/tmp/primd.sock`, `wyoming: listening on …`) and one
//! ready line (index, passages, model, retriever). A daemon started from a shell or a
//! service file should say where it listens and that it is serving, without the whole
//! `info` log (`RUST_LOG=primd=info`).
//!
//! These lines go to their own log target, which the default filter lets through at
//! `info`; `RUST_LOG` replaces the default filter as usual (`RUST_LOG=warn` silences
//! them, `RUST_LOG=primd=info` includes them).

/// The log target of the announcements.
pub const TARGET: &str = "primd::startup";

/// The logger's filter when `RUST_LOG` is not set: warnings, and the announcements.
pub const DEFAULT_FILTER: &str = "warn,primd::startup=info";

/// `log::info!` to [`TARGET`]: a line printed at the default log level.
#[macro_export]
macro_rules! announce {
    ($($arg:tt)+) => {
        log::info!(target: $crate::announce::TARGET, $($arg)+)
    };
}
