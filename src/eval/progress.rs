//! Work split over a few threads, with a progress bar on stderr.
//!
//! The evaluation embeds tens of thousands of texts; each worker owns its own
//! embedder (a fork of the loaded model) and retriever ([`crate::parallel::map`]), and
//! the calling thread only draws the bar. The bar is plain text
//! (`\r` redraws), shown only when stderr is a terminal and not `--quiet`: no
//! dependency, nothing written into logs or pipes.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

const REDRAW: Duration = Duration::from_millis(200);

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

/// [`crate::parallel::map`] (`workers` threads, a `state` each, results in item order,
/// the first error stops the run) with the progress bar drawn by the calling thread.
pub fn run_parallel<T, S, R>(
    label: &str,
    items: &[T],
    workers: usize,
    progress: &Progress,
    make_state: impl FnMut() -> anyhow::Result<S>,
    work: impl Fn(&mut S, usize, &T) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>>
where
    T: Sync,
    S: Send,
    R: Send,
{
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    let work = |state: &mut S, i: usize, item: &T| {
        let r = work(state, i, item);
        done.fetch_add(1, Ordering::Relaxed);
        r
    };
    if !progress.shown {
        return crate::parallel::map(items, workers, make_state, work);
    }
    std::thread::scope(|scope| {
        // The bar redraws every 200 ms until the run is over (its sender dropped).
        let (over, is_over) = std::sync::mpsc::channel::<()>();
        let done = &done;
        scope.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = is_over.recv_timeout(REDRAW) {
                progress.draw(
                    label,
                    done.load(Ordering::Relaxed),
                    items.len(),
                    started,
                    false,
                );
            }
            progress.draw(
                label,
                done.load(Ordering::Relaxed),
                items.len(),
                started,
                true,
            );
        });
        let out = crate::parallel::map(items, workers, make_state, work);
        drop(over);
        out
    })
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
