//! `cargo xtask repro rdk`: the synthetic experiment of the RDK paper (oov-sampling-rdk.txt §6.2,
//! Fig. 7) — acceptance of a pruned drafter under masking, TLI and RDK, across pruning levels.
//!
//! The report's first section is §6.2 as printed ([`crate::repro_rdk_fig7`]: Student-t target
//! logits, Eq. 3, the paper's 26.7% beside ours). This module is our earlier, richer setup, kept
//! as an extension and reported second: the generative model, the pruning rule and the affinity
//! matrix below are ours.
//!
//! Model (one context = one draw):
//! - Tokens `v = 0 … V−1` have a Zipf prior `b_v = −ln(v + 1)` and belong to cluster
//!   `v mod C` (clusters of `V/C` tokens that span every frequency rank, so that a frequent kept
//!   token has rare pruned neighbours).
//! - Target logits `z_p(v) = b_v + σ_c·u_{c(v)} + σ_e·e_v`; drafter logits
//!   `z_q(v) = b_v + σ_c·u'_{c(v)} + σ_e·e'_v`, with every `u, e ~ Student-t(ν)` and the
//!   drafter's noise correlated with the target's: `u' = ρu + √(1−ρ²)ũ` (same for `e'`).
//!   `p = softmax(z_p)`, `q = softmax(z_q)`.
//! - FR pruning keeps the `m` tokens with the highest mean target probability over a separate
//!   set of calibration contexts (the synthetic stand-in for corpus frequency).
//! - The affinity matrix `M` is built from the model's structure the way
//!   `anyspec_affinity::build` builds it from co-occurrence: row `i` scores the other members `j`
//!   of its cluster by their prior, `s_ij = b_j`, keeps the `k − 1` best, gives the token itself
//!   the row's best score, and `M_ij = softmax_τ(s_i·)`.
//!
//! Acceptance `α = Σ_v min(p_v, q̃_v)` of one draft token, for
//! - **full**: `q̃ = q` (no pruning; the ceiling);
//! - **masked-only**: `q̃ = q·1_S`, not renormalized — the drafter's head is pruned but its
//!   distribution is used as if it were not; mass on pruned tokens is lost (a draft that falls
//!   there is rejected), so `α = Σ_{v∈S} min(p_v, q_v)`;
//! - **TLI**: `q̃ = q·1_S / q(S)` (hetero-vocab-sd Alg 4; `anyspec_core::projection::tli_projection`);
//! - **RDK**: `q̃ = Mᵀ q_TLI` (`anyspec_core::projection::rdk_exact`), which can put mass on
//!   pruned tokens.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyspec_core::projection::{ABSENT, AffinityMatrix, IdMap, SparseScores, rdk_exact, tli_projection};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Parameters of the synthetic experiment.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Vocabulary size V.
    pub(crate) vocab: usize,
    /// Tokens per cluster.
    pub(crate) cluster_size: usize,
    /// Student-t degrees of freedom ν.
    pub(crate) nu: u32,
    /// Zipf exponent s of the prior b_v = −s·ln(v + 1).
    pub(crate) prior_scale: f64,
    /// Scale of the shared cluster noise σ_c.
    pub(crate) sigma_cluster: f64,
    /// Scale of the per-token noise σ_e.
    pub(crate) sigma_token: f64,
    /// Correlation ρ of the drafter's noise with the target's.
    pub(crate) rho: f64,
    /// Entries per row of M, the token itself included.
    pub(crate) top_k: usize,
    /// Contexts averaged per pruning level.
    pub(crate) contexts: usize,
    /// Contexts used to rank tokens for FR pruning.
    pub(crate) calibration: usize,
    /// Base seed.
    pub(crate) seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            vocab: 200_000,
            cluster_size: 50,
            nu: 5,
            prior_scale: 1.2,
            sigma_cluster: 1.0,
            sigma_token: 0.5,
            rho: 0.9,
            top_k: 32,
            contexts: 200,
            calibration: 100,
            seed: 2025,
        }
    }
}

/// Softmax temperatures τ of M's rows; RDK is measured with each.
const TAUS: [f64; 3] = [0.5, 1.0, 2.0];

/// Kept-vocabulary sizes swept, from no pruning down to 500 tokens.
const LEVELS: &[usize] = &[200_000, 100_000, 50_000, 20_000, 10_000, 5_000, 2_000, 1_000, 500];

struct Model {
    options: Options,
    clusters: usize,
    prior: Vec<f64>,
}

/// A standard normal draw (Box–Muller; one of the pair is discarded for simplicity).
fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A Student-t draw with integer ν: `N / sqrt(χ²_ν / ν)`.
pub(crate) fn student_t(rng: &mut StdRng, nu: u32) -> f64 {
    let z = normal(rng);
    let chi2: f64 = (0..nu).map(|_| normal(rng).powi(2)).sum();
    z / (chi2 / f64::from(nu)).max(1e-300).sqrt()
}

fn softmax(logits: &[f64]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|&z| (z - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|&e| (e / total) as f32).collect()
}

impl Model {
    fn new(options: Options) -> Self {
        let clusters = (options.vocab / options.cluster_size).max(1);
        let prior = (0..options.vocab).map(|v| -((v + 1) as f64).ln()).collect();
        Model { options, clusters, prior }
    }

    /// One context: the target's and the drafter's distributions.
    fn context(&self, seed: u64) -> (Vec<f32>, Vec<f32>) {
        let o = &self.options;
        let mut rng = StdRng::seed_from_u64(seed);
        let rho_c = (1.0 - o.rho * o.rho).sqrt();
        let mut cluster = Vec::with_capacity(self.clusters);
        for _ in 0..self.clusters {
            let u = student_t(&mut rng, o.nu);
            cluster.push((u, o.rho * u + rho_c * student_t(&mut rng, o.nu)));
        }
        let (mut zp, mut zq) = (Vec::with_capacity(o.vocab), Vec::with_capacity(o.vocab));
        for v in 0..o.vocab {
            let (u, u_draft) = cluster[v % self.clusters];
            let e = student_t(&mut rng, o.nu);
            let e_draft = o.rho * e + rho_c * student_t(&mut rng, o.nu);
            zp.push(o.prior_scale * self.prior[v] + o.sigma_cluster * u + o.sigma_token * e);
            zq.push(o.prior_scale * self.prior[v] + o.sigma_cluster * u_draft + o.sigma_token * e_draft);
        }
        (softmax(&zp), softmax(&zq))
    }

    /// M for the kept set `S` (see the module documentation).
    fn affinity(&self, kept: &[bool], tau: f64) -> anyhow::Result<AffinityMatrix> {
        let o = &self.options;
        let n = o.vocab;
        let (mut row_offsets, mut columns, mut values) = (vec![0usize], Vec::new(), Vec::new());
        for i in 0..n {
            if kept[i] {
                let c = i % self.clusters;
                // Pruned members of the cluster in prior order (ascending id = descending b).
                let mut row: Vec<(u32, f32)> = (c..n)
                    .step_by(self.clusters)
                    .filter(|&j| !kept[j])
                    .take(o.top_k.saturating_sub(1))
                    .map(|j| (j as u32, (o.prior_scale * self.prior[j]) as f32))
                    .collect();
                if !row.is_empty() {
                    let best = row.iter().map(|e| e.1).fold((o.prior_scale * self.prior[i]) as f32, f32::max);
                    row.push((i as u32, best));
                    row.sort_unstable_by_key(|e| e.0);
                    columns.extend(row.iter().map(|e| e.0));
                    values.extend(row.iter().map(|e| e.1));
                }
            }
            row_offsets.push(columns.len());
        }
        let scores = SparseScores::from_csr(n, row_offsets, columns, values)?;
        Ok(AffinityMatrix::from_scores(&scores, tau)?)
    }
}

fn acceptance(p: &[f32], q: &[f32]) -> f64 {
    p.iter().zip(q).map(|(&a, &b)| f64::from(a.min(b))).sum()
}

/// Sums over contexts for one pruning level.
#[derive(Clone, Copy, Default)]
struct Sums {
    q_kept: f64,
    p_kept: f64,
    full: f64,
    masked: f64,
    tli: f64,
    /// RDK with each of [`TAUS`].
    rdk: [f64; 3],
    /// Contexts in which the drafter had no mass on its kept tokens.
    empty: f64,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.q_kept += o.q_kept;
        self.p_kept += o.p_kept;
        self.full += o.full;
        self.masked += o.masked;
        self.tli += o.tli;
        self.rdk.iter_mut().zip(o.rdk).for_each(|(a, b)| *a += b);
        self.empty += o.empty;
    }
}

struct Level {
    kept: usize,
    mask: Vec<bool>,
    map: IdMap,
    /// M for this kept set, one per τ in [`TAUS`].
    matrices: Vec<AffinityMatrix>,
}

fn measure(model: &Model, levels: &[Level], seeds: &[u64]) -> anyhow::Result<Vec<Sums>> {
    let mut sums = vec![Sums::default(); levels.len()];
    for &seed in seeds {
        let (p, q) = model.context(seed);
        let full = acceptance(&p, &q);
        for (level, sum) in levels.iter().zip(sums.iter_mut()) {
            let mut s = Sums { full, ..Sums::default() };
            for (v, &keep) in level.mask.iter().enumerate() {
                if keep {
                    s.q_kept += f64::from(q[v]);
                    s.p_kept += f64::from(p[v]);
                    s.masked += f64::from(p[v].min(q[v]));
                }
            }
            // A drafter with no mass left on its kept tokens (f32 underflow under heavy-tailed
            // logits) cannot draft at all: TLI and RDK accept nothing in that context.
            if s.q_kept > 0.0 {
                let tli = tli_projection(&q, &level.map)?;
                s.tli = acceptance(&p, &tli);
                for (r, matrix) in s.rdk.iter_mut().zip(&level.matrices) {
                    *r = acceptance(&p, &rdk_exact(&tli, matrix)?);
                }
            } else {
                s.empty = 1.0;
            }
            sum.add(&s);
        }
    }
    Ok(sums)
}

pub(crate) fn run(options: Options) -> anyhow::Result<()> {
    let started = Instant::now();
    anyhow::ensure!(options.vocab >= 1000, "--vocab must be at least 1000, got {}", options.vocab);
    anyhow::ensure!(options.contexts > 0 && options.calibration > 0, "--contexts and --calibration must be > 0");
    let model = Model::new(options.clone());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);

    // FR ranking: mean target probability over calibration contexts (seeds disjoint from the
    // measured ones).
    let calibration_seeds: Vec<u64> = (0..options.calibration as u64).map(|i| options.seed ^ (1 << 40) ^ i).collect();
    let mut mean_p = vec![0f64; options.vocab];
    let partials: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = calibration_seeds
            .chunks(calibration_seeds.len().div_ceil(threads))
            .map(|chunk| {
                let model = &model;
                scope.spawn(move || {
                    let mut acc = vec![0f64; model.options.vocab];
                    for &seed in chunk {
                        let (p, _) = model.context(seed);
                        acc.iter_mut().zip(&p).for_each(|(a, &x)| *a += f64::from(x));
                    }
                    acc
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a calibration thread panicked")).collect()
    });
    for part in partials {
        mean_p.iter_mut().zip(part).for_each(|(a, x)| *a += x);
    }
    let mut ranked: Vec<u32> = (0..options.vocab as u32).collect();
    ranked.sort_unstable_by(|&a, &b| mean_p[b as usize].total_cmp(&mean_p[a as usize]).then(a.cmp(&b)));

    let levels: Vec<Level> = LEVELS
        .iter()
        .map(|&m| m.min(options.vocab))
        .map(|kept| {
            let mut mask = vec![false; options.vocab];
            ranked.iter().take(kept).for_each(|&v| mask[v as usize] = true);
            let map: Vec<u32> = mask.iter().enumerate().map(|(v, &k)| if k { v as u32 } else { ABSENT }).collect();
            let matrices = TAUS.iter().map(|&tau| model.affinity(&mask, tau)).collect::<anyhow::Result<_>>()?;
            Ok(Level { kept, mask, map: IdMap::new(map, options.vocab)?, matrices })
        })
        .collect::<anyhow::Result<_>>()?;

    let seeds: Vec<u64> = (0..options.contexts as u64).map(|i| options.seed.wrapping_add(i)).collect();
    let parts: Vec<anyhow::Result<Vec<Sums>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .chunks(seeds.len().div_ceil(threads))
            .map(|chunk| {
                let (model, levels) = (&model, &levels);
                scope.spawn(move || measure(model, levels, chunk))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a measuring thread panicked")).collect()
    });
    let mut sums = vec![Sums::default(); levels.len()];
    for part in parts {
        for (total, s) in sums.iter_mut().zip(part?) {
            total.add(&s);
        }
    }
    let n = options.contexts as f64;
    let rows: Vec<(usize, Sums)> = levels
        .iter()
        .zip(&sums)
        .map(|(l, s)| {
            (
                l.kept,
                Sums {
                    q_kept: s.q_kept / n,
                    p_kept: s.p_kept / n,
                    full: s.full / n,
                    masked: s.masked / n,
                    tli: s.tli / n,
                    rdk: s.rdk.map(|r| r / n),
                    empty: s.empty,
                },
            )
        })
        .collect();

    let reports = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports");
    std::fs::create_dir_all(&reports)?;
    let drew = draw(&reports.join("rdk.png"), &rows)?;
    let paper = crate::repro_rdk_fig7::section(&reports, options.contexts.min(100), options.seed)?;
    let seconds = started.elapsed().as_secs_f64();
    std::fs::write(reports.join("rdk.md"), markdown(&options, &rows, drew, seconds, &paper)?)?;
    #[allow(clippy::print_stdout)]
    {
        println!("wrote reports/rdk.md{} in {seconds:.1} s", if drew { " and reports/rdk.png" } else { "" });
    }
    Ok(())
}

fn markdown(o: &Options, rows: &[(usize, Sums)], drew: bool, seconds: f64, paper: &str) -> anyhow::Result<String> {
    let mut md = String::new();
    writeln!(md, "# RDK synthetic experiment (oov-sampling-rdk §6.2 / Fig. 7)\n")?;
    writeln!(
        md,
        "Generated by `cargo run --release -p xtask -- repro rdk` in {seconds:.0} s ({} build). The first \
         section follows §6.2 as printed (Student-t logits, Eq. 3) and prints the paper's 26.7% beside ours; \
         the second is our earlier, richer setup (cluster model, the exact RDK with a sparse M), kept as an \
         extension.\n",
        if cfg!(debug_assertions) { "debug" } else { "release" }
    )?;
    md.push_str(paper);
    writeln!(md, "## Ours: cluster model, exact RDK (an extension, not the paper's setup)\n")?;
    writeln!(md, "### Setup\n")?;
    writeln!(
        md,
        "- V = {} tokens, Zipf prior b_v = −ln(v+1), clusters of {} tokens (token v in cluster v mod {}).\n\
         - Target logits {}·b_v + {}·u_c(v) + {}·e_v; drafter logits the same with noise correlated ρ = {} \
         (u, e ~ Student-t, ν = {}).\n\
         - FR pruning: keep the m tokens with the highest mean target probability over {} calibration contexts.\n\
         - M (for the kept set S): the row of a kept token scores the *pruned* members of its cluster by \
         prior, keeps the {} best plus the token itself (self score = the row's best), softmax with τ ∈ {:?}; \
         rows of pruned tokens are empty (they carry no drafter mass), so without pruning M is the identity.\n\
         - {} measured contexts per level (seed {}); acceptance α = Σ_v min(p_v, q̃_v) of one draft token.\n\
         - masked-only: q·1_S without renormalization (pruned mass lost); TLI: q·1_S / q(S); RDK: Mᵀ q_TLI.\n",
        o.vocab,
        o.cluster_size,
        o.vocab / o.cluster_size,
        o.prior_scale,
        o.sigma_cluster,
        o.sigma_token,
        o.rho,
        o.nu,
        o.calibration,
        o.top_k - 1,
        TAUS,
        o.contexts,
        o.seed
    )?;
    writeln!(md, "### Acceptance by kept drafter vocabulary\n")?;
    writeln!(
        md,
        "| kept m | q(S) | p(S) | full | masked-only | TLI | RDK τ={} | RDK τ={} | RDK τ={} | best RDK − TLI | contexts with q(S) = 0 |",
        TAUS[0], TAUS[1], TAUS[2]
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for (kept, s) in rows {
        let best = s.rdk.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        writeln!(
            md,
            "| {kept} | {:.3} | {:.3} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:.4} | {:+.4} | {} |",
            s.q_kept,
            s.p_kept,
            s.full,
            s.masked,
            s.tli,
            s.rdk[0],
            s.rdk[1],
            s.rdk[2],
            best - s.tli,
            s.empty
        )?;
    }
    writeln!(md)?;
    writeln!(md, "### Reading\n")?;
    let better: Vec<String> = rows
        .iter()
        .filter(|(kept, s)| *kept < o.vocab && s.rdk.iter().any(|&r| r > s.tli))
        .map(|(kept, _)| kept.to_string())
        .collect();
    if let Some((kept, s)) = rows.last() {
        let best = s.rdk.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        writeln!(
            md,
            "- At m = {kept} ({:.2}% of the vocabulary) the drafter keeps q(S) = {:.3} of its mass: masked-only \
             accepts {:.1}%, TLI {:.1}%, the best RDK {:.1}% (full drafter: {:.1}%).",
            100.0 * *kept as f64 / o.vocab as f64,
            s.q_kept,
            100.0 * s.masked,
            100.0 * s.tli,
            100.0 * best,
            100.0 * s.full
        )?;
    }
    writeln!(
        md,
        "- RDK beats TLI (for some τ) at m ∈ {{{}}}; elsewhere moving mass from kept tokens to pruned neighbours \
         costs more than it gains, most with a large τ (flat rows give a kept token's mass away).",
        better.join(", ")
    )?;
    writeln!(
        md,
        "- These figures depend on our model (noise scales, ρ, cluster structure); the section above is the \
         one to compare with the paper.\n"
    )?;
    if drew {
        writeln!(md, "![acceptance vs kept vocabulary](rdk.png)\n")?;
    } else {
        writeln!(md, "Not drawn: no TrueType font (DejaVuSans) was found on this machine.\n")?;
    }
    Ok(md)
}

fn draw(path: &Path, rows: &[(usize, Sums)]) -> anyhow::Result<bool> {
    use plotters::prelude::*;
    if !crate::plot::register_font()? {
        return Ok(false);
    }
    let x_min = rows.iter().map(|r| r.0).min().unwrap_or(1) as f64;
    let x_max = rows.iter().map(|r| r.0).max().unwrap_or(2) as f64;
    let y_max = rows.iter().map(|r| r.1.full.max(r.1.tli)).chain(rows.iter().flat_map(|r| r.1.rdk)).fold(0.0, f64::max);
    let root = BitMapBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Synthetic RDK experiment (reconstruction): acceptance vs kept drafter tokens", ("sans-serif", 22))
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..(y_max * 1.1).min(1.0))?;
    chart
        .configure_mesh()
        .x_desc("kept drafter vocabulary m (FR pruning, log scale)")
        .y_desc("acceptance α = Σ min(p, q̃)")
        .label_style(("sans-serif", 14))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    type Pick = fn(&Sums) -> f64;
    let series: [(&str, RGBColor, Pick); 6] = [
        ("full (no pruning)", RGBColor(127, 127, 127), |s| s.full),
        ("masked-only", RGBColor(214, 39, 40), |s| s.masked),
        ("TLI", RGBColor(31, 119, 180), |s| s.tli),
        ("RDK τ=0.5", RGBColor(152, 223, 138), |s| s.rdk[0]),
        ("RDK τ=1", RGBColor(44, 160, 44), |s| s.rdk[1]),
        ("RDK τ=2", RGBColor(23, 90, 23), |s| s.rdk[2]),
    ];
    for (name, color, pick) in series {
        let points: Vec<(f64, f64)> = rows.iter().map(|(m, s)| (*m as f64, pick(s))).collect();
        chart
            .draw_series(std::iter::once(PathElement::new(points.clone(), color.stroke_width(2))))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font(("sans-serif", 14))
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Model {
        Model::new(Options { vocab: 4000, cluster_size: 20, contexts: 4, calibration: 4, ..Options::default() })
    }

    #[test]
    fn contexts_are_distributions_and_reproducible() {
        let model = small();
        let (p, q) = model.context(7);
        for d in [&p, &q] {
            assert!((d.iter().map(|&x| f64::from(x)).sum::<f64>() - 1.0).abs() < 1e-4);
        }
        assert_eq!(model.context(7), (p.clone(), q.clone()));
        assert_ne!(model.context(8).0, p);
        let full = acceptance(&p, &q);
        assert!(full > 0.0 && full < 1.0, "{full}");
    }

    #[test]
    fn orderings_that_must_hold() {
        let model = small();
        let n = model.options.vocab;
        let all = vec![true; n];
        // No pruning: M is the identity, so RDK equals TLI equals the full drafter.
        let identity = model.affinity(&all, 1.0).unwrap();
        assert_eq!(identity.nnz(), 0);
        let half: Vec<bool> = (0..n).map(|v| v < n / 2).collect();
        let map: Vec<u32> = (0..n as u32).map(|v| if (v as usize) < n / 2 { v } else { ABSENT }).collect();
        let levels = vec![
            Level {
                kept: n,
                mask: all,
                map: IdMap::identity(n),
                matrices: TAUS.iter().map(|_| identity.clone()).collect(),
            },
            Level {
                kept: n / 2,
                mask: half.clone(),
                map: IdMap::new(map, n).unwrap(),
                matrices: TAUS.iter().map(|&t| model.affinity(&half, t).unwrap()).collect(),
            },
        ];
        let sums = measure(&model, &levels, &[1, 2, 3]).unwrap();
        let (none, pruned) = (&sums[0], &sums[1]);
        assert!((none.tli - none.full).abs() < 1e-5 && none.rdk.iter().all(|r| (r - none.full).abs() < 1e-5));
        // Renormalizing can only help: every kept token's q grows, so min(p, q) does not shrink.
        assert!(pruned.tli >= pruned.masked - 1e-9 && pruned.masked < none.masked);
        // Rows of kept tokens spread only to pruned tokens of their cluster.
        let m = model.affinity(&half, 1.0).unwrap();
        let (offsets, columns, values) = m.csr();
        for row in 0..n {
            for k in offsets[row]..offsets[row + 1] {
                let c = columns[k] as usize;
                assert!(half[row] && (c == row || (!half[c] && c % model.clusters == row % model.clusters)));
                assert!(values[k] > 0.0);
            }
        }
    }
}
