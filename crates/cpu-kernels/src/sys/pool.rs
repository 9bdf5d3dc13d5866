//! A small persistent thread pool: `n - 1` workers plus the calling thread run the same
//! closure, which shares out its own work (an atomic chunk counter).
//!
//! The caller never waits for a worker that has not started: a worker registers (`active`)
//! and then checks that the job is still open; the caller, once its own share is done,
//! closes the job and waits only for the registered workers. On a machine shared with other
//! processes a descheduled worker then costs nothing (the caller does its chunks), instead
//! of a scheduler time slice per product.
//!
//! Why not spawn per call: a decoding step of a small model makes a couple of hundred matrix
//! products of a few microseconds each, and starting a thread costs about as much as one of
//! them. Why spin before sleeping: waking a parked thread through the kernel costs several
//! microseconds too, while the next product usually arrives within microseconds; after
//! [`SPIN`] without work a worker parks on a condition variable and costs nothing.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins (watching for the next job) before it parks.
const SPIN: Duration = Duration::from_micros(200);

/// The lent job: a pointer to the caller's closure, valid while the call that lent it waits.
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn() + Sync + 'static));

// SAFETY: the pointee is `Sync`, so calling it from another thread is sound; the pointer is
// only dereferenced while `Pool::run` keeps the closure alive (see there).
unsafe impl Send for JobPtr {}

struct Shared {
    /// Bumped once per job; a worker runs the job when it sees a value it has not seen.
    generation: AtomicU64,
    job: Mutex<Option<JobPtr>>,
    /// The generation whose job may still be joined (0: none).
    open: AtomicU64,
    /// Workers inside a job.
    active: AtomicUsize,
    /// Workers parked (or about to park) on `wake`.
    sleeping: AtomicUsize,
    sleep_lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
    panicked: AtomicBool,
}

pub(crate) struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises callers sharing one pool.
    call: Mutex<()>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("workers", &self.workers.len()).finish()
    }
}

impl Pool {
    /// A pool with `workers` extra threads (0 is allowed: `run` then calls the job inline).
    /// Returns the pool with as many workers as could be started, and the error of the first
    /// one that could not.
    pub(crate) fn new(workers: usize) -> (Pool, Option<(usize, std::io::Error)>) {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: Mutex::new(None),
            open: AtomicU64::new(0),
            active: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
        });
        let mut handles = Vec::with_capacity(workers);
        let mut error = None;
        for index in 1..=workers {
            let shared = Arc::clone(&shared);
            let spawned =
                std::thread::Builder::new().name(format!("cpu-kernels-{index}")).spawn(move || worker(&shared));
            match spawned {
                Ok(handle) => handles.push(handle),
                Err(e) => {
                    error = Some((index, e));
                    break;
                }
            }
        }
        (Pool { shared, workers: handles, call: Mutex::new(()) }, error)
    }

    /// Threads that run a job: the workers and the caller.
    pub(crate) fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `job` once on every worker and once on the calling thread, and returns when all
    /// have returned. A panic in a worker is re-raised here.
    pub(crate) fn run(&self, job: &(dyn Fn() + Sync)) {
        if self.workers.is_empty() {
            job();
            return;
        }
        let _call = self.call.lock().unwrap_or_else(PoisonError::into_inner);
        let shared = &*self.shared;
        // SAFETY: only the lifetime is erased. A worker dereferences the pointer only after
        // registering in `active` and seeing its generation still `open`; `CloseAndWait`
        // (dropped before this function returns or unwinds) closes the job and then waits
        // until `active` is zero, so the closure outlives every use. The `call` lock keeps a
        // second caller from replacing the job meanwhile.
        let ptr =
            unsafe { std::mem::transmute::<*const (dyn Fn() + Sync + '_), *const (dyn Fn() + Sync + 'static)>(job) };
        *shared.job.lock().unwrap_or_else(PoisonError::into_inner) = Some(JobPtr(ptr));
        let generation = shared.generation.load(Ordering::SeqCst) + 1;
        shared.open.store(generation, Ordering::SeqCst);
        shared.generation.store(generation, Ordering::SeqCst);
        if shared.sleeping.load(Ordering::SeqCst) > 0 {
            let _guard = shared.sleep_lock.lock().unwrap_or_else(PoisonError::into_inner);
            shared.wake.notify_all();
        }
        let wait = CloseAndWait(shared);
        job();
        drop(wait);
        if shared.panicked.swap(false, Ordering::SeqCst) {
            panic!("a cpu-kernels worker thread panicked");
        }
    }
}

/// Closes the job and waits (in `drop`, so also while unwinding) until no worker is inside it.
struct CloseAndWait<'a>(&'a Shared);

impl Drop for CloseAndWait<'_> {
    fn drop(&mut self) {
        self.0.open.store(0, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.0.active.load(Ordering::SeqCst) != 0 {
            if spins < 1 << 16 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        *self.0.job.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let _guard = self.shared.sleep_lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.shared.wake.notify_all();
        }
        for handle in self.workers.drain(..) {
            // A worker never panics outside `catch_unwind`; nothing to report if one did.
            let _ = handle.join();
        }
    }
}

fn worker(shared: &Shared) {
    let mut seen = 0u64;
    loop {
        // Wait for a new generation: spin first, then park.
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            let generation = shared.generation.load(Ordering::SeqCst);
            if generation != seen {
                seen = generation;
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() < SPIN {
                // Let another runnable thread of this core go first (the machine may be shared).
                std::thread::yield_now();
                continue;
            }
            let guard = shared.sleep_lock.lock().unwrap_or_else(PoisonError::into_inner);
            shared.sleeping.fetch_add(1, Ordering::SeqCst);
            let new_job = shared.generation.load(Ordering::SeqCst) != seen;
            let guard = if new_job || shared.shutdown.load(Ordering::SeqCst) {
                guard
            } else {
                shared.wake.wait(guard).unwrap_or_else(PoisonError::into_inner)
            };
            shared.sleeping.fetch_sub(1, Ordering::SeqCst);
            drop(guard);
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        if shared.open.load(Ordering::SeqCst) == seen {
            let job = *shared.job.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(JobPtr(ptr)) = job {
                // SAFETY: registered in `active` while the job was open: the caller of
                // `Pool::run` keeps the closure alive until `active` drops to zero, which
                // happens only after this call returns (below).
                let f = unsafe { &*ptr };
                if catch_unwind(AssertUnwindSafe(f)).is_err() {
                    shared.panicked.store(true, Ordering::SeqCst);
                }
            }
        }
        shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_runs_the_job_once_per_call() {
        for workers in [0, 1, 3] {
            let (pool, error) = Pool::new(workers);
            assert!(error.is_none());
            assert_eq!(pool.threads(), workers + 1);
            for _ in 0..200 {
                let calls = AtomicUsize::new(0);
                pool.run(&|| {
                    calls.fetch_add(1, Ordering::SeqCst);
                });
                // A worker may skip a job that closed before it started, never run it twice.
                let n = calls.load(Ordering::SeqCst);
                assert!((1..=workers + 1).contains(&n), "{n} runs with {workers} workers");
            }
        }
    }

    #[test]
    fn shared_work_is_done_exactly_once() {
        let (pool, _) = Pool::new(2);
        for round in 0..100 {
            let next = AtomicUsize::new(0);
            let done: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
            pool.run(&|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= done.len() {
                        break;
                    }
                    done[i].fetch_add(1, Ordering::SeqCst);
                }
            });
            assert!(done.iter().all(|d| d.load(Ordering::SeqCst) == 1), "round {round}");
        }
    }

    #[test]
    fn a_worker_panic_is_raised_in_the_caller_and_the_pool_survives() {
        let (pool, _) = Pool::new(1);
        let caller = std::thread::current().id();
        // Only a worker panics; wait until one has run the job (it may skip a job that closed
        // before it started).
        let mut raised = false;
        for _ in 0..1000 {
            let result = catch_unwind(AssertUnwindSafe(|| {
                pool.run(&|| {
                    if std::thread::current().id() != caller {
                        panic!("worker");
                    }
                    std::thread::sleep(Duration::from_millis(1));
                })
            }));
            if result.is_err() {
                raised = true;
                break;
            }
        }
        assert!(raised);
        let calls = AtomicUsize::new(0);
        pool.run(&|| {
            calls.fetch_add(1, Ordering::SeqCst);
        });
        assert!(calls.load(Ordering::SeqCst) >= 1);
    }
}
