//! The one parallel map of the offline work (`build-index`'s embedding, `primd eval`'s
//! replays): a rayon pool of a chosen size, one state per thread (each its own embedder
//! fork), results in item order, and the first error stops the run. Not for the daemon:
//! its hot path has its own threads and no locks.

use std::sync::Mutex;

use rayon::prelude::*;

/// Runs `work(state, i, &items[i])` for every item on `workers` threads and returns the
/// results in item order. Each thread gets its own `state`, made by `make_state` before
/// any work starts (a failure there is returned at once). The first error of `work`
/// stops the run: items not yet started are skipped, and that error is returned (when
/// several fail at once, one of them). A panic in `work` propagates to the caller.
pub fn map<T, S, R>(
    items: &[T],
    workers: usize,
    mut make_state: impl FnMut() -> anyhow::Result<S>,
    work: impl Fn(&mut S, usize, &T) -> anyhow::Result<R> + Sync,
) -> anyhow::Result<Vec<R>>
where
    T: Sync,
    S: Send,
    R: Send,
{
    let workers = workers.clamp(1, items.len().max(1));
    let states = (0..workers)
        .map(|_| make_state().map(Mutex::new))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .thread_name(|i| format!("primd-worker-{i}"))
        .build()?;
    pool.install(|| {
        items
            .par_iter()
            .enumerate()
            .map(|(i, item)| {
                // Inside the pool: its thread index picks that thread's own state, so
                // the lock is never contended.
                let t = rayon::current_thread_index().unwrap_or(0);
                let mut state = states[t].lock().unwrap_or_else(|p| p.into_inner());
                work(&mut state, i, item)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn results_come_back_in_item_order_with_one_state_per_thread() {
        let items: Vec<u32> = (0..1000).collect();
        let made = AtomicUsize::new(0);
        let out = map(
            &items,
            3,
            || Ok(made.fetch_add(1, Ordering::Relaxed)),
            |_, i, x| Ok((i as u32, x * 2)),
        )
        .unwrap();
        assert_eq!(made.load(Ordering::Relaxed), 3, "one state per worker");
        assert_eq!(out.len(), 1000);
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, &(j, y))| j == i as u32 && y == 2 * i as u32)
        );
    }

    #[test]
    fn the_first_error_stops_the_run() {
        let items: Vec<u32> = (0..100_000).collect();
        let ran = AtomicUsize::new(0);
        let e = map(
            &items,
            2,
            || Ok(()),
            |_, i, _| {
                ran.fetch_add(1, Ordering::Relaxed);
                if i == 37 {
                    anyhow::bail!("item 37 is bad")
                }
                Ok(())
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("item 37"), "{e}");
        let ran = ran.load(Ordering::Relaxed);
        assert!(ran < items.len(), "all {ran} items ran despite the error");
    }

    #[test]
    fn a_failing_state_fails_before_any_work() {
        let ran = AtomicUsize::new(0);
        let e = map(
            &[1, 2, 3],
            2,
            || anyhow::bail!("no model"),
            |_: &mut (), _, _| {
                ran.fetch_add(1, Ordering::Relaxed);
                Ok(())
            },
        )
        .unwrap_err();
        assert_eq!((e.to_string().as_str(), ran.into_inner()), ("no model", 0));
    }
}
