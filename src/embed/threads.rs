//! A small persistent thread pool for the work inside one embed (`embedder_threads`).
//!
//! One embed of a short query is ~24 GEMMs of 0.03-0.3 ms each, so spawning threads per
//! embed (~20-50 µs each) or even parking and waking them per GEMM (~5-10 µs per wake)
//! would eat the gain. The pool's workers are started once per embedder; after a job
//! they spin for a short while ([`SPIN`]) waiting for the next one, which in an embed
//! comes a few µs later, and then sleep on a condition variable, so an idle daemon costs
//! no CPU (on a Pi the speech recognizer needs those cores between partials).
//!
//! [`Pool::run`] implements [`Parallel`]. The job is cut into a few parts per
//! thread, handed out by an atomic counter: the caller works too, and on a busy machine
//! (workers descheduled) it simply takes the parts nobody claimed, instead of waiting a
//! scheduler time slice for a worker to wake — a fixed split (part `i` on thread `i`)
//! measured 9 ms instead of 0.55 per embed with 2 threads under a load of 5 on 2 cores.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::qgemm::Parallel;

/// How long an idle worker spins before sleeping.
const SPIN: Duration = Duration::from_micros(200);

/// Parts per thread: a job is cut finer than the thread count so that whoever is
/// running (the caller, when the workers are descheduled by a busy machine) takes the
/// parts nobody else has claimed, instead of waiting for a sleeping worker.
const PARTS_PER_THREAD: usize = 4;

/// The job being run, its lifetime erased (see the SAFETY arguments in [`Pool::run`]).
type Job = *const (dyn Fn(usize) + Sync);

#[derive(Clone, Copy)]
struct SendJob(Job);
// SAFETY: the pointee is `Sync` (callable from any thread), and it is only called for a
// part claimed in its own generation, while `Pool::run` waits for that part to finish.
unsafe impl Send for SendJob {}

struct Shared {
    /// The current job and its generation (published together).
    job: Mutex<(u64, Option<SendJob>)>,
    wake: Condvar,
    /// Generation in the high 32 bits, next unclaimed part in the low 32: a claim is a
    /// compare-and-swap that fails if the job has changed, so a late worker never calls
    /// a finished job.
    next: AtomicU64,
    /// Parts of the current job finished.
    done: AtomicUsize,
    panicked: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    /// Claims the next part of generation `generation`, if any is left.
    fn claim(&self, generation: u64, parts: usize) -> Option<usize> {
        let mut cur = self.next.load(Ordering::Acquire);
        loop {
            let (g, i) = (cur >> 32, (cur & 0xffff_ffff) as usize);
            if g != generation & 0xffff_ffff || i >= parts {
                return None;
            }
            match self
                .next
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(i),
                Err(now) => cur = now,
            }
        }
    }

    /// Runs claimed parts of `job` until none is left.
    fn work(&self, generation: u64, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        while let Some(i) = self.claim(generation, parts) {
            if catch_unwind(AssertUnwindSafe(|| f(i))).is_err() {
                self.panicked.store(true, Ordering::Release);
            }
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// A caller and `threads − 1` workers.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises `run` calls (the pool is `Sync`, one job runs at a time).
    running: Mutex<u64>,
}

impl Pool {
    pub(crate) fn new(threads: usize) -> Self {
        let shared = Arc::new(Shared {
            job: Mutex::new((0, None)),
            wake: Condvar::new(),
            next: AtomicU64::new(0),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let parts = threads.max(1) * PARTS_PER_THREAD;
        let workers = (1..threads.max(1))
            .map(|t| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("primd-embed-{t}"))
                    .spawn(move || worker(&shared, parts))
                    .expect("spawning an embed worker thread")
            })
            .collect();
        Pool {
            shared,
            workers,
            running: Mutex::new(0),
        }
    }
}

fn worker(shared: &Shared, parts: usize) {
    let lock = || shared.job.lock().unwrap_or_else(|e| e.into_inner());
    let mut seen = 0u64;
    loop {
        // Spin a little (the next GEMM of an embed comes within µs), then sleep.
        let t0 = Instant::now();
        let mut spins = 0u32;
        while (shared.next.load(Ordering::Acquire) >> 32) == seen & 0xffff_ffff {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
            spins += 1;
            if spins.is_multiple_of(64) && t0.elapsed() > SPIN {
                let mut job = lock();
                while job.0 == seen && !shared.stop.load(Ordering::Acquire) {
                    job = shared.wake.wait(job).unwrap_or_else(|e| e.into_inner());
                }
                break;
            }
            std::hint::spin_loop();
        }
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let (generation, job) = *lock();
        seen = generation;
        if let Some(job) = job {
            // SAFETY: `work` calls `f` only for a part it claimed in `generation`, the
            // generation this pointer was published with; `run` does not return (so the
            // closure stays alive) until every claimed part of it has finished.
            let f = unsafe { &*job.0 };
            shared.work(generation, parts, f);
        }
    }
}

// SAFETY: parts are handed out by an atomic counter, each index once per generation;
// `run` returns only when all `parts()` of them have finished (`done`), and a part is
// only claimed for the generation whose closure it calls.
unsafe impl Parallel for Pool {
    fn parts(&self) -> usize {
        (self.workers.len() + 1) * PARTS_PER_THREAD
    }

    fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        let mut generation = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        let parts = self.parts();
        *generation += 1;
        let g = *generation;
        // SAFETY: lifetime erasure only; the pointer is only called for parts claimed in
        // generation `g`, and this function waits until all of them are done.
        let job: Job = unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), Job>(f) };
        s.done.store(0, Ordering::Release);
        {
            let mut slot = s.job.lock().unwrap_or_else(|e| e.into_inner());
            *slot = (g, Some(SendJob(job)));
            s.next.store((g & 0xffff_ffff) << 32, Ordering::Release);
        }
        s.wake.notify_all();
        s.work(g, parts, f);
        let mut spins = 0u32;
        while s.done.load(Ordering::Acquire) != parts {
            spins += 1;
            if spins > 1 << 10 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        assert!(
            !s.panicked.swap(false, Ordering::AcqRel),
            "a part of an embed job panicked"
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
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads);
            let parts = pool.parts();
            assert_eq!(parts, threads * PARTS_PER_THREAD);
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
        let r = catch_unwind(AssertUnwindSafe(|| pool.run(&|i| assert_ne!(i, 5))));
        assert!(r.is_err());
        // The pool still works afterwards.
        let n = AtomicUsize::new(0);
        pool.run(&|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), pool.parts());
    }
}
