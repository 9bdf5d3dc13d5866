//! [`Threads`]: how many threads the kernels use.

use std::sync::Arc;

use crate::sys::pool::Pool;
use crate::{Error, Result};

/// How many threads the kernels use: a persistent pool of `n - 1` workers plus the calling
/// thread. Cheap to clone (clones share the pool); a process may hold several pools. The
/// workers stop when the last clone is dropped.
///
/// Idle workers spin for a fraction of a millisecond after each product (the next one usually
/// follows within microseconds) and then sleep. Calls from several threads into one pool take
/// turns; give each caller its own `Threads` to run them concurrently.
#[derive(Clone, Debug)]
pub struct Threads {
    pool: Arc<Pool>,
}

impl Threads {
    /// A pool of `n` threads (the caller's included); an error for 0 or when the operating
    /// system refuses a thread.
    pub fn new(n: usize) -> Result<Self> {
        if n == 0 {
            return Err(Error::ZeroThreads);
        }
        let (pool, error) = Pool::new(n - 1);
        match error {
            Some((index, source)) => Err(Error::Spawn { index, source }),
            None => Ok(Threads { pool: Arc::new(pool) }),
        }
    }

    /// One thread per available core (`std::thread::available_parallelism`), or as many as
    /// the operating system would start.
    pub fn available() -> Self {
        let n = std::thread::available_parallelism().map_or(1, usize::from);
        let (pool, _) = Pool::new(n - 1);
        Threads { pool: Arc::new(pool) }
    }

    /// A single thread: the caller's, no workers.
    pub fn single() -> Self {
        Threads { pool: Arc::new(Pool::new(0).0) }
    }

    /// The number of threads, the caller's included.
    pub fn count(&self) -> usize {
        self.pool.threads()
    }

    /// Runs `job` on every thread of the pool at once; returns when all have returned.
    pub(crate) fn broadcast(&self, job: &(dyn Fn() + Sync)) {
        self.pool.run(job);
    }
}
