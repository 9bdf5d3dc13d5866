//! [`Threads`]: how many threads the kernels use.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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

    /// Splits `data` into consecutive chunks of `chunk_len` items (the last may be shorter) and
    /// runs `job(index, chunk)` for every chunk, spread over the pool's threads; returns when
    /// all are done. Chunks are handed out one at a time, so a thread slowed by another process
    /// holds up little. For work the matrix products do not cover (attention over heads).
    ///
    /// # Panics
    /// When `chunk_len` is 0.
    pub fn for_each_chunk_mut<T: Send>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        job: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        assert!(chunk_len > 0, "for_each_chunk_mut needs chunks of at least one item");
        if self.count() == 1 || data.len() <= chunk_len {
            data.chunks_mut(chunk_len).enumerate().for_each(|(i, chunk)| job(i, chunk));
            return;
        }
        let chunks: Vec<Mutex<&mut [T]>> = data.chunks_mut(chunk_len).map(Mutex::new).collect();
        let next = AtomicUsize::new(0);
        self.broadcast(&|| {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(chunk) = chunks.get(i) else { break };
                let mut chunk = chunk.lock().unwrap_or_else(PoisonError::into_inner);
                job(i, &mut chunk);
            }
        });
    }

    /// Runs `job` on every thread of the pool at once; returns when all have returned.
    pub(crate) fn broadcast(&self, job: &(dyn Fn() + Sync)) {
        self.pool.run(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_is_visited_once_with_its_index() {
        for threads in [1, 2, 3] {
            let pool = Threads::new(threads).unwrap();
            let mut data: Vec<usize> = vec![0; 103];
            pool.for_each_chunk_mut(&mut data, 10, &|index, chunk| {
                for (j, x) in chunk.iter_mut().enumerate() {
                    *x += index * 10 + j + 1;
                }
            });
            let expected: Vec<usize> = (1..=103).collect();
            assert_eq!(data, expected, "{threads} threads");
        }
    }
}
