//! A small persistent thread pool for the work inside one embed (`embedder_threads`).
//!
//! One embed of a short query is ~24 GEMMs of 0.03-0.3 ms each, so spawning threads per
//! embed (~20-50 µs each) or even parking and waking them per GEMM (~5-10 µs per wake)
//! would eat the gain. The pool's workers are started once per embedder; after a job
//! they spin for a short while ([`SPIN`]) waiting for the next one, which in an embed
//! comes a few µs later, and then sleep on a condition variable, so an idle daemon costs
//! no CPU (on a Pi the speech recognizer needs those cores between partials).
//!
//! [`Pool::run`] implements [`qgemm::Parallel`]: part 0 on the calling thread, parts
//! `1..n` on the workers, return when all are done.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::qgemm::Parallel;

/// How long an idle worker spins before sleeping.
const SPIN: Duration = Duration::from_micros(200);

/// The job being run, its lifetime erased (see the SAFETY argument in [`Pool::run`]).
type Job = *const (dyn Fn(usize) + Sync);

struct Shared {
    /// Bumped once per job; a worker runs each generation it sees once.
    generation: AtomicU64,
    /// Workers still running the current job.
    pending: AtomicUsize,
    panicked: AtomicBool,
    stop: AtomicBool,
    job: Mutex<Option<SendJob>>,
    wake: Condvar,
}

#[derive(Clone, Copy)]
struct SendJob(Job);
// SAFETY: the pointee is `Sync` (callable from any thread), and it is only dereferenced
// while `Pool::run`, which owns the borrow, waits for every worker to finish with it.
unsafe impl Send for SendJob {}

/// `parts` threads in all: the caller and `parts − 1` workers.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises `run` calls (the pool is `Sync`, one job runs at a time).
    running: Mutex<()>,
}

impl Pool {
    pub(crate) fn new(parts: usize) -> Self {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            job: Mutex::new(None),
            wake: Condvar::new(),
        });
        let workers = (1..parts.max(1))
            .map(|part| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("primd-embed-{part}"))
                    .spawn(move || worker(&shared, part))
                    .expect("spawning an embed worker thread")
            })
            .collect();
        Pool {
            shared,
            workers,
            running: Mutex::new(()),
        }
    }
}

fn worker(shared: &Shared, part: usize) {
    let mut seen = 0u64;
    loop {
        // Spin a little, then sleep until the generation moves.
        let t0 = Instant::now();
        let mut spins = 0u32;
        while shared.generation.load(Ordering::Acquire) == seen {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            spins += 1;
            if spins.is_multiple_of(64) && t0.elapsed() > SPIN {
                let mut job = shared.job.lock().unwrap_or_else(|e| e.into_inner());
                while shared.generation.load(Ordering::Acquire) == seen
                    && !shared.stop.load(Ordering::Acquire)
                {
                    job = shared.wake.wait(job).unwrap_or_else(|e| e.into_inner());
                }
                break;
            }
            std::hint::spin_loop();
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        seen = shared.generation.load(Ordering::Acquire);
        let job = shared
            .job
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .expect("a job");
        // SAFETY: `run` published this job before bumping the generation and does not
        // return (so the closure stays alive) until `pending` reaches zero, which this
        // worker only signals after its call below has returned.
        let f = unsafe { &*job.0 };
        if catch_unwind(AssertUnwindSafe(|| f(part))).is_err() {
            shared.panicked.store(true, Ordering::Release);
        }
        shared.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

// SAFETY: `run` calls `f(0)` on the calling thread and `f(i)` for `i` in `1..parts()` on
// worker `i`, each exactly once per generation, and returns only once `pending` shows
// that every worker call has returned.
unsafe impl Parallel for Pool {
    fn parts(&self) -> usize {
        self.workers.len() + 1
    }

    fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        let _one = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY (lifetime erasure): the pointer is only dereferenced by workers between
        // the generation bump below and their `pending` decrement; this function waits
        // for `pending == 0` before returning, so `f` outlives every use.
        let job: Job = unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), Job>(f) };
        {
            let mut slot = s.job.lock().unwrap_or_else(|e| e.into_inner());
            *slot = Some(SendJob(job));
            s.pending.store(self.workers.len(), Ordering::Release);
            s.generation.fetch_add(1, Ordering::AcqRel);
        }
        s.wake.notify_all();
        let mine = catch_unwind(AssertUnwindSafe(|| f(0)));
        let mut spins = 0u32;
        while s.pending.load(Ordering::Acquire) != 0 {
            spins += 1;
            if spins > 1 << 12 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        assert!(
            !s.panicked.swap(false, Ordering::AcqRel),
            "an embed worker thread panicked"
        );
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        {
            let _slot = self.shared.job.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_per_job_and_jobs_do_not_overlap() {
        for parts in [1, 2, 3] {
            let pool = Pool::new(parts);
            assert_eq!(pool.parts(), parts);
            for round in 0..200 {
                let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
                pool.run(&|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "{round}"
                );
                if round % 50 == 0 {
                    // Let workers fall asleep, then wake them.
                    std::thread::sleep(SPIN * 3);
                }
            }
        }
    }

    #[test]
    fn a_panicking_part_is_reported_to_the_caller() {
        let pool = Pool::new(2);
        let r = catch_unwind(AssertUnwindSafe(|| pool.run(&|i| assert_ne!(i, 1))));
        assert!(r.is_err());
        // The pool still works afterwards.
        let n = AtomicUsize::new(0);
        pool.run(&|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }
}
