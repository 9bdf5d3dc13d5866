//! The vocabulary partition of DynaSpec §4.2: spherical k-means on the column-normalized LM-head
//! weights `{W_LM[:, v] / ‖W_LM[:, v]‖₂}_{v ∈ V}`, into `M` disjoint clusters `C_1 … C_M`.
//!
//! As the paper says, balance is not enforced: `|C_m|` varies, which keeps semantically dense
//! regions together. The run is deterministic for a seed whatever the thread count: assignments
//! are per row (split across threads), centroid sums run in row order on one thread.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::index::sample;

use crate::error::{Error, Result};

/// A partition of the vocabulary into clusters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clusters {
    /// `assignment[v]`: the cluster of token `v`.
    assignment: Vec<u32>,
    /// `members[m]`: the tokens of cluster `m`, ascending.
    members: Vec<Vec<u32>>,
}

/// Parameters of [`spherical_kmeans`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KMeansParams {
    /// `M`, the number of clusters.
    pub clusters: usize,
    /// Lloyd iterations at most (the run stops early when no assignment changes).
    pub iterations: usize,
    /// Seed of the initial centroids.
    pub seed: u64,
    /// Threads for the assignment step (at least 1).
    pub threads: usize,
}

impl Clusters {
    /// The partition given by each token's cluster.
    ///
    /// # Errors
    /// When `clusters` is 0, or a token names a cluster `≥ clusters`, or a cluster is empty.
    pub fn from_assignment(assignment: Vec<u32>, clusters: usize) -> Result<Clusters> {
        if clusters == 0 {
            return Err(Error::invalid("a partition needs at least one cluster"));
        }
        let mut members = vec![Vec::new(); clusters];
        for (token, &m) in assignment.iter().enumerate() {
            let list = members.get_mut(m as usize).ok_or_else(|| {
                Error::invalid(format!("token {token} is in cluster {m}, but there are only {clusters} clusters"))
            })?;
            list.push(token as u32);
        }
        if let Some(empty) = members.iter().position(Vec::is_empty) {
            return Err(Error::invalid(format!("cluster {empty} of {clusters} has no token")));
        }
        Ok(Clusters { assignment, members })
    }

    /// `M`.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there is no cluster (never, for a built partition).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `|V|`, the vocabulary size partitioned.
    pub fn vocab_size(&self) -> usize {
        self.assignment.len()
    }

    /// The cluster of each token.
    pub fn assignment(&self) -> &[u32] {
        &self.assignment
    }

    /// The cluster of `token`.
    pub fn cluster_of(&self, token: u32) -> Option<u32> {
        self.assignment.get(token as usize).copied()
    }

    /// The tokens of cluster `m`, ascending.
    pub fn members(&self, m: usize) -> &[u32] {
        &self.members[m]
    }

    /// Every cluster's tokens, cluster by cluster: the partition as a list of blocks.
    pub fn all_members(&self) -> &[Vec<u32>] {
        &self.members
    }

    /// Sizes of every cluster.
    pub fn sizes(&self) -> Vec<usize> {
        self.members.iter().map(Vec::len).collect()
    }
}

/// Spherical k-means of `rows` (`[vocab, dim]` row-major, row `v` the LM-head weights of token
/// `v`) into `params.clusters` clusters, DynaSpec §4.2.
///
/// Rows are normalized to unit length (an all-zero row stays zero and joins whichever cluster
/// wins the tie, the first), centroids are the normalized means of their members, assignment is
/// by largest cosine. A cluster left empty is re-seeded with the row farthest from its centroid
/// (deterministically), so every cluster is non-empty.
///
/// # Errors
/// When `rows` is not a whole number of `dim`-wide rows, `M` is 0 or larger than the vocabulary
/// (`M > |V|`), `threads` is 0 or `iterations` is 0.
pub fn spherical_kmeans(rows: &[f32], dim: usize, params: &KMeansParams) -> Result<Clusters> {
    if dim == 0 || rows.is_empty() || !rows.len().is_multiple_of(dim) {
        return Err(Error::invalid(format!(
            "the LM head holds {} values, not a whole number of rows of width {dim}",
            rows.len()
        )));
    }
    let vocab = rows.len() / dim;
    let m = params.clusters;
    if m == 0 || m > vocab {
        return Err(Error::invalid(format!(
            "{m} clusters asked of a vocabulary of {vocab} tokens; ask for 1..={vocab} (M ≤ |V|)"
        )));
    }
    if params.threads == 0 || params.iterations == 0 {
        return Err(Error::invalid("k-means needs at least one thread and one iteration"));
    }
    let points = normalized(rows, dim);
    let mut rng = StdRng::seed_from_u64(params.seed);
    let mut centroids: Vec<f32> = Vec::with_capacity(m * dim);
    for i in sample(&mut rng, vocab, m).into_iter() {
        centroids.extend_from_slice(&points[i * dim..(i + 1) * dim]);
    }
    let mut assignment = vec![u32::MAX; vocab];
    let mut best = vec![0f32; vocab];
    for _ in 0..params.iterations {
        let changed = assign(&points, dim, &centroids, params.threads, &mut assignment, &mut best);
        let mut sums = vec![0f64; m * dim];
        let mut counts = vec![0usize; m];
        for (v, &c) in assignment.iter().enumerate() {
            counts[c as usize] += 1;
            let sum = &mut sums[c as usize * dim..(c as usize + 1) * dim];
            for (s, &x) in sum.iter_mut().zip(&points[v * dim..(v + 1) * dim]) {
                *s += f64::from(x);
            }
        }
        // Empty clusters take the rows farthest from their centroids, each row at most once.
        let mut taken = vec![false; vocab];
        for c in 0..m {
            if counts[c] > 0 {
                continue;
            }
            let far = (0..vocab)
                .filter(|&v| !taken[v] && counts[assignment[v] as usize] > 1)
                .min_by(|&a, &b| best[a].total_cmp(&best[b]).then(a.cmp(&b)));
            let Some(v) = far else { break };
            taken[v] = true;
            let old = assignment[v] as usize;
            counts[old] -= 1;
            for (k, &x) in points[v * dim..(v + 1) * dim].iter().enumerate() {
                sums[old * dim + k] -= f64::from(x);
                sums[c * dim + k] = f64::from(x);
            }
            counts[c] = 1;
            assignment[v] = c as u32;
        }
        for c in 0..m {
            let sum = &sums[c * dim..(c + 1) * dim];
            let norm = sum.iter().map(|s| s * s).sum::<f64>().sqrt();
            let centroid = &mut centroids[c * dim..(c + 1) * dim];
            if norm > 0.0 {
                for (x, s) in centroid.iter_mut().zip(sum) {
                    *x = (s / norm) as f32;
                }
            }
        }
        if !changed {
            break;
        }
    }
    Clusters::from_assignment(assignment, m)
}

fn normalized(rows: &[f32], dim: usize) -> Vec<f32> {
    let mut out = rows.to_vec();
    for row in out.chunks_exact_mut(dim) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            row.iter_mut().for_each(|x| *x /= norm);
        }
    }
    out
}

/// Assigns each point to its most similar centroid (ties to the lowest index), on `threads`
/// threads; returns whether any assignment changed.
fn assign(points: &[f32], dim: usize, centroids: &[f32], threads: usize, out: &mut [u32], best: &mut [f32]) -> bool {
    let vocab = out.len();
    let chunk = vocab.div_ceil(threads).max(1);
    let mut changed = false;
    std::thread::scope(|scope| {
        let handles: Vec<_> = out
            .chunks_mut(chunk)
            .zip(best.chunks_mut(chunk))
            .enumerate()
            .map(|(i, (out, best))| {
                let start = i * chunk;
                scope.spawn(move || {
                    let mut changed = false;
                    for (j, (slot, score)) in out.iter_mut().zip(best.iter_mut()).enumerate() {
                        let p = &points[(start + j) * dim..(start + j + 1) * dim];
                        let (c, s) = nearest(p, centroids, dim);
                        changed |= *slot != c;
                        *slot = c;
                        *score = s;
                    }
                    changed
                })
            })
            .collect();
        for handle in handles {
            // A panic in a worker is a bug in `nearest`; resurface it rather than hide it.
            changed |= handle.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
    changed
}

/// The centroid of largest dot product with `p` (ties to the lowest index) and that product.
pub(crate) fn nearest(p: &[f32], centroids: &[f32], dim: usize) -> (u32, f32) {
    let mut best = (0u32, f32::NEG_INFINITY);
    for (c, centroid) in centroids.chunks_exact(dim).enumerate() {
        let s = dot(p, centroid);
        if s > best.1 {
            best = (c as u32, s);
        }
    }
    best
}

/// `Σ a_i b_i`, in eight lanes so that the compiler vectorizes it.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            lanes[k] += x[k] * y[k];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    /// Points around `k` well-separated directions in 8 dimensions, with varied lengths (the
    /// clustering must ignore length).
    fn blobs(k: usize, per: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let dim = 8;
        let mut rows = Vec::new();
        let mut truth = Vec::new();
        for i in 0..k * per {
            let c = i % k;
            let scale = 0.5 + 3.0 * rng.random::<f32>();
            for d in 0..dim {
                let base = if d == c { 1.0 } else { 0.0 };
                rows.push(scale * (base + 0.05 * (rng.random::<f32>() - 0.5)));
            }
            truth.push(c as u32);
        }
        (rows, truth)
    }

    #[test]
    fn recovers_separated_directions_whatever_the_thread_count() {
        let (rows, truth) = blobs(4, 50, 1);
        let params = KMeansParams { clusters: 4, iterations: 30, seed: 7, threads: 1 };
        let one = spherical_kmeans(&rows, 8, &params).unwrap();
        let two = spherical_kmeans(&rows, 8, &KMeansParams { threads: 2, ..params }).unwrap();
        let three = spherical_kmeans(&rows, 8, &KMeansParams { threads: 3, ..params }).unwrap();
        assert_eq!(one, two);
        assert_eq!(one, three);
        // Same truth class ⇔ same cluster.
        for a in 0..truth.len() {
            for b in 0..truth.len() {
                assert_eq!(truth[a] == truth[b], one.assignment()[a] == one.assignment()[b], "rows {a} and {b}");
            }
        }
        assert_eq!(one.sizes(), vec![50; 4]);
    }

    #[test]
    fn every_cluster_is_non_empty_and_the_partition_covers_the_vocabulary() {
        // More clusters than natural groups: re-seeding must fill every one.
        let (rows, _) = blobs(3, 10, 2);
        let c =
            spherical_kmeans(&rows, 8, &KMeansParams { clusters: 12, iterations: 10, seed: 3, threads: 2 }).unwrap();
        assert_eq!(c.len(), 12);
        assert!(c.sizes().iter().all(|&s| s > 0), "{:?}", c.sizes());
        assert_eq!(c.sizes().iter().sum::<usize>(), 30);
        for m in 0..c.len() {
            assert!(c.members(m).iter().all(|&t| c.cluster_of(t) == Some(m as u32)));
        }
    }

    #[test]
    fn another_seed_can_give_another_partition_but_the_same_seed_never_does() {
        let mut rng = StdRng::seed_from_u64(9);
        let rows: Vec<f32> = (0..200 * 8).map(|_| rng.random::<f32>() - 0.5).collect();
        let p = KMeansParams { clusters: 10, iterations: 5, seed: 1, threads: 2 };
        let a = spherical_kmeans(&rows, 8, &p).unwrap();
        assert_eq!(a, spherical_kmeans(&rows, 8, &p).unwrap());
        let b = spherical_kmeans(&rows, 8, &KMeansParams { seed: 2, ..p }).unwrap();
        assert_ne!(a, b, "uniform noise clustered identically from two seeds");
    }

    #[test]
    fn bad_parameters_are_refused_with_the_fix() {
        let rows = vec![1.0f32; 16];
        let p = KMeansParams { clusters: 3, iterations: 5, seed: 0, threads: 1 };
        let message = spherical_kmeans(&rows, 8, &p).unwrap_err().to_string();
        assert!(message.contains("1..=2"), "{message}");
        assert!(spherical_kmeans(&rows, 5, &KMeansParams { clusters: 1, ..p }).is_err());
        assert!(spherical_kmeans(&rows, 8, &KMeansParams { clusters: 1, threads: 0, ..p }).is_err());
        assert!(Clusters::from_assignment(vec![0, 2], 2).is_err());
        assert!(Clusters::from_assignment(vec![0, 0], 2).is_err());
    }
}
