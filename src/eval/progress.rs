//! Work split over a few threads, with a progress bar on stderr.
//!
//! The evaluation embeds tens of thousands of texts; each worker owns its own
//! embedder (a fork of the loaded model) and retriever, takes items by index from a
//! shared counter, and the calling thread only draws the bar. The bar is plain text
//! (`\r` redraws), shown only when stderr is a terminal and not `--quiet`: no
//! dependency, nothing written into logs or pipes.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Items a worker takes at once (small: items cost milliseconds each).
const BATCH: usize = 8;

/// A progress bar that may be hidden.
pub struct Progress {
    shown: bool,
}

impl Progress {
    /// Shown when `enabled` and stderr is a terminal.
    pub fn new(enabled: bool) -> Self {
        Progress {
            shown: enabled && std::io::stderr().is_terminal(),
        }
    }

    pub fn hidden() -> Self {
        Progress { shown: false }
    }

    fn draw(&self, label: &str, done: usize, total: usize, started: Instant, last: bool) {
        if !self.shown {
            return;
        }
        const WIDTH: usize = 30;
        let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
        let secs = started.elapsed().as_secs_f64();
        let rate = done as f64 / secs.max(1e-9);
        let eta = if done > 0 {
            (total - done) as f64 / rate
        } else {
            0.0
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{label:<18} [{}{}] {done}/{total} {rate:.0}/s {}s elapsed, eta {}s   ",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            secs.round(),
            eta.round()
        );
        if last {
            let _ = writeln!(err);
        }
        let _ = err.flush();
    }
}

/// Runs `work(state, i, &items[i])` for every item on `workers` threads, each with a
/// `state` made by `make_state` on that thread; returns the results in item order.
/// The first error stops every worker and is returned.
pub fn run_parallel<T, S, R>(
    label: &str,
    items: &[T],
    workers: usize,
    progress: &Progress,
    make_state: impl Fn() -> anyhow::Result<S> + Sync,
    work: impl Fn(&mut S, usize, &T) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>>
where
    T: Sync,
    R: Send,
{
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let started = Instant::now();
    let workers = workers.clamp(1, items.len().max(1));
    let parts = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<Vec<(usize, R)>> {
                    let run = || -> anyhow::Result<Vec<(usize, R)>> {
                        let mut state = make_state()?;
                        let mut out = Vec::new();
                        while !failed.load(Ordering::Relaxed) {
                            let start = next.fetch_add(BATCH, Ordering::Relaxed);
                            if start >= items.len() {
                                break;
                            }
                            let end = (start + BATCH).min(items.len());
                            for (i, item) in items.iter().enumerate().take(end).skip(start) {
                                out.push((i, work(&mut state, i, item)?));
                            }
                            done.fetch_add(end - start, Ordering::Relaxed);
                        }
                        Ok(out)
                    };
                    let r = run();
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            progress.draw(
                label,
                done.load(Ordering::Relaxed),
                items.len(),
                started,
                false,
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        progress.draw(
            label,
            done.load(Ordering::Relaxed),
            items.len(),
            started,
            true,
        );
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("an evaluation worker panicked"))?
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let mut all: Vec<(usize, R)> = parts.into_iter().flatten().collect();
    all.sort_unstable_by_key(|(i, _)| *i);
    debug_assert_eq!(all.len(), items.len());
    Ok(all.into_iter().map(|(_, r)| r).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_item_order_and_errors_stop_the_run() {
        let items: Vec<u32> = (0..100).collect();
        let out = run_parallel(
            "t",
            &items,
            3,
            &Progress::hidden(),
            || Ok(0u32),
            |calls, i, x| {
                *calls += 1;
                Ok((i as u32, x * 2))
            },
        )
        .unwrap();
        assert_eq!(out.len(), 100);
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, &(j, y))| j == i as u32 && y == 2 * i as u32)
        );
        let e = run_parallel(
            "t",
            &items,
            2,
            &Progress::hidden(),
            || Ok(()),
            |_, i, _| {
                if i == 37 {
                    anyhow::bail!("item 37 is bad")
                }
                Ok(())
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("37"), "{e}");
    }
}
