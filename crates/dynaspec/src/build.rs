//! Building a router for a model from corpus text: cluster the LM head, read the drafter's
//! hidden states and the target's next-token distributions along the text, train the router,
//! measure its recall on held-out text.
//!
//! **Inputs and labels.** At position `i` of a text `x`, the router sees `[E(x_i), H̃_{i−1}]`
//! (the embedding of the token just appended and the drafter's final hidden state one position
//! earlier, §4.2) and must cover the distribution of `x_{i+1}`. Its positive clusters are those
//! of the **target's** `label_top_k` most likely next tokens (default 4). Why the target's and
//! why few: under greedy verification a draft token is accepted iff it is the target's argmax,
//! and the drafter's restricted argmax equals its full-head argmax whenever that token is in the
//! shortlist, so the target's top-1 is the token the shortlist must keep; the next few carry most
//! of the remaining target mass, which matters under sampling (Thm 5.1's `p(S)`). The paper
//! labels with the full-vocabulary drafter's top-L instead; with a self-speculative drafter the
//! target's distribution is at hand and is what acceptance is measured against.

use std::time::Instant;

use anyspec_core::{Progress, ProgressUnit};
use anyspec_models::Llama;
use anyspec_train::{RouterData, RouterTrainConfig, train_router};

use crate::artifact::{RouterFile, RouterInfo, data_digest, model_fingerprint};
use crate::clusters::{Clusters, KMeansParams, spherical_kmeans};
use crate::error::{Error, Result};
use crate::router::{Router, top_k};

/// How a router is built.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildParams {
    /// `M`.
    pub clusters: usize,
    /// Lloyd iterations at most.
    pub kmeans_iterations: usize,
    /// Seed of k-means and of the router's training.
    pub seed: u64,
    /// Layers of the self-speculative drafter (`Llama::first_layers`).
    pub drafter_layers: usize,
    /// Labels: clusters of the target's `label_top_k` most likely next tokens.
    pub label_top_k: usize,
    /// Texts are cut into windows of at most this many tokens (one forward pass each).
    pub window: usize,
    /// Stop reading text after this many positions (training and held-out together).
    pub max_positions: usize,
    /// Every `valid_every`-th window is held out for the recall measurement.
    pub valid_every: usize,
    /// Cluster budgets at which recall is measured.
    pub recall_budgets: Vec<usize>,
    /// Threads for k-means.
    pub threads: usize,
    /// The router's training.
    pub train: RouterTrainConfig,
    /// What the corpus was (recorded in the artifact).
    pub corpus: String,
}

impl Default for BuildParams {
    fn default() -> Self {
        BuildParams {
            clusters: 256,
            kmeans_iterations: 25,
            seed: 0,
            drafter_layers: 6,
            label_top_k: 4,
            window: 128,
            max_positions: 20_000,
            valid_every: 10,
            recall_budgets: vec![1, 2, 4, 8, 16, 32, 64],
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            train: RouterTrainConfig::default(),
            corpus: String::new(),
        }
    }
}

/// Held-out recall at one budget, DynaSpec beside a frequency-ranked list of the same mean size.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RecallRow {
    /// Clusters kept (`k`).
    pub clusters: usize,
    /// Mean shortlist size (EOS included).
    pub mean_size: f64,
    /// Mean share of the vocabulary.
    pub vocab_share: f64,
    /// Mean target probability mass inside the shortlist (`p(S)` of Thm 5.1).
    pub target_mass: f64,
    /// How often the target's most likely token is inside.
    pub top1_hit: f64,
    /// The same two for the corpus's most frequent `round(mean_size)` tokens (FR-Spec).
    pub fr_target_mass: f64,
    /// FR-Spec's top-1 hit rate.
    pub fr_top1_hit: f64,
}

/// What a build measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BuildReport {
    /// Training positions.
    pub train_positions: usize,
    /// Held-out positions.
    pub valid_positions: usize,
    /// Cluster sizes: smallest, median, largest.
    pub cluster_sizes: (usize, usize, usize),
    /// Mean positive clusters per position.
    pub mean_positive_clusters: f64,
    /// Training loss per epoch.
    pub loss_log: Vec<f32>,
    /// Held-out loss per epoch.
    pub valid_log: Vec<f32>,
    /// Held-out recall per budget.
    pub recall: Vec<RecallRow>,
    /// Seconds: clustering, reading the text with both models, training.
    pub seconds: (f64, f64, f64),
}

/// A held-out position: router input, and the target's distribution (its ids by probability,
/// truncated where the remaining mass is negligible).
struct Held {
    input: Vec<f32>,
    top: Vec<(u32, f32)>,
}

/// Builds the router for `target` from the token sequences `texts` (already tokenized with the
/// target's tokenizer; each is cut into windows of `params.window`).
///
/// # Errors
/// [`Error::InvalidArgument`] for parameters out of range (`M > |V|`, a drafter deeper than the
/// model, no text), and any model or training error, as text.
pub fn build_router(
    target: &Llama,
    texts: &[Vec<u32>],
    params: &BuildParams,
    progress: &dyn Progress,
) -> Result<(RouterFile, BuildReport)> {
    let c = target.config().clone();
    let (vocab, d) = (c.vocab_size, c.hidden_size);
    if params.label_top_k == 0 || params.label_top_k > vocab {
        return Err(Error::invalid(format!("label_top_k = {} is out of range; use 1..={vocab}", params.label_top_k)));
    }
    if params.window < 2 || params.valid_every < 2 || params.max_positions == 0 {
        return Err(Error::invalid("window must be at least 2, valid_every at least 2 and max_positions positive"));
    }
    let model_err = |e: anyspec_models::Error| Error::invalid(e.to_string());
    let drafter = target.first_layers(params.drafter_layers).map_err(model_err)?;

    let t0 = Instant::now();
    progress.start("clustering the LM head", None, ProgressUnit::Items);
    let head = target.lm_head_rows().map_err(model_err)?;
    let fingerprint = model_fingerprint(vocab, d, &head);
    let kmeans = KMeansParams {
        clusters: params.clusters,
        iterations: params.kmeans_iterations,
        seed: params.seed,
        threads: params.threads.max(1),
    };
    let clusters = spherical_kmeans(&head, d, &kmeans)?;
    drop(head);
    progress.finish();
    let cluster_seconds = t0.elapsed().as_secs_f64();

    let t1 = Instant::now();
    let windows: Vec<&[u32]> = texts.iter().flat_map(|t| t.chunks(params.window)).filter(|w| w.len() >= 2).collect();
    if windows.is_empty() {
        return Err(Error::invalid("the corpus gave no text of at least two tokens; give more text"));
    }
    let one = drafter.pruned_head(&[0]).map_err(model_err)?;
    let mut train = RouterData { input_size: 2 * d, clusters: clusters.len(), ..RouterData::default() };
    let mut held = Vec::new();
    let mut frequency = vec![0u64; vocab];
    let mut used: Vec<&[u32]> = Vec::new();
    let mut positive_total = 0usize;
    progress.start(
        "reading the corpus with the drafter and the target",
        Some(params.max_positions as u64),
        ProgressUnit::Items,
    );
    for (w, window) in windows.iter().enumerate() {
        if train.len() + held.len() >= params.max_positions {
            break;
        }
        let is_valid = w % params.valid_every == params.valid_every - 1;
        let n = window.len();
        let hidden =
            drafter.forward_with_hidden(window, &mut drafter.new_cache(), n, Some(&one)).map_err(model_err)?.hidden;
        let logits = target.forward_on_host(window, &mut target.new_cache(), n, None).map_err(model_err)?;
        if !is_valid {
            window.iter().for_each(|&t| frequency[t as usize] += 1);
            used.push(window);
        }
        for i in 1..n {
            let mut input = target.embedding(window[i]).map_err(model_err)?;
            input.extend_from_slice(&hidden[i - 1]);
            let probs = softmax(&logits[i]);
            if is_valid {
                held.push(Held { input, top: top_mass(&probs, 0.999, 256) });
            } else {
                let mut positives: Vec<u32> =
                    top_k(&probs, params.label_top_k).into_iter().filter_map(|t| clusters.cluster_of(t)).collect();
                positives.sort_unstable();
                positives.dedup();
                positive_total += positives.len();
                train.inputs.extend_from_slice(&input);
                train.positives.push(positives);
            }
        }
        progress.advance((n - 1) as u64);
    }
    progress.finish();
    if train.is_empty() || held.is_empty() {
        return Err(Error::invalid(format!(
            "the corpus gave {} training and {} held-out positions; give more text (every {}th window of {} tokens \
             is held out)",
            train.len(),
            held.len(),
            params.valid_every,
            params.window
        )));
    }
    let read_seconds = t1.elapsed().as_secs_f64();

    let t2 = Instant::now();
    let valid = RouterData {
        inputs: held.iter().flat_map(|h| h.input.iter().copied()).collect(),
        input_size: 2 * d,
        positives: held
            .iter()
            .map(|h| {
                let mut p: Vec<u32> =
                    h.top.iter().take(params.label_top_k).filter_map(|&(t, _)| clusters.cluster_of(t)).collect();
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect(),
        clusters: clusters.len(),
    };
    let device = burn::tensor::Device::flex();
    let weights = train_router(&train, Some(&valid), &params.train, &device, progress)
        .map_err(|e| Error::invalid(format!("training the router failed: {e}")))?;
    let train_seconds = t2.elapsed().as_secs_f64();
    let router =
        Router::new(2 * d, params.train.hidden, clusters.len(), weights.w1, weights.b1, weights.w2, weights.b2)?;

    let mut ranking: Vec<u32> = (0..vocab as u32).collect();
    ranking.sort_by(|a, b| frequency[*b as usize].cmp(&frequency[*a as usize]).then(a.cmp(b)));
    let eos = c.eos_token_ids.clone();
    let recall = measure_recall(&clusters, &router, &held, &ranking, &eos, &params.recall_budgets)?;

    let mut sizes = clusters.sizes();
    sizes.sort_unstable();
    let report = BuildReport {
        train_positions: train.len(),
        valid_positions: held.len(),
        cluster_sizes: (sizes[0], sizes[sizes.len() / 2], sizes[sizes.len() - 1]),
        mean_positive_clusters: positive_total as f64 / train.len() as f64,
        loss_log: weights.loss_log.clone(),
        valid_log: weights.valid_log.clone(),
        recall: recall.clone(),
        seconds: (cluster_seconds, read_seconds, train_seconds),
    };
    let info = RouterInfo {
        model_fingerprint: fingerprint,
        vocab_size: vocab,
        hidden_size: d,
        drafter_layers: params.drafter_layers,
        kmeans_seed: params.seed,
        kmeans_iterations: params.kmeans_iterations,
        label_top_k: params.label_top_k,
        corpus: params.corpus.clone(),
        data_digest: data_digest(used.iter().copied()),
        positions: train.len(),
        epochs: params.train.epochs,
        loss_log: weights.loss_log,
        recall: recall.iter().map(|r| (r.clusters, r.mean_size as f32, r.target_mass as f32)).collect(),
    };
    Ok((RouterFile::new(info, clusters, router)?, report))
}

/// Held-out recall of the router at each budget, and of FR-Spec lists of the same mean sizes.
fn measure_recall(
    clusters: &Clusters,
    router: &Router,
    held: &[Held],
    ranking: &[u32],
    eos: &[u32],
    budgets: &[usize],
) -> Result<Vec<RecallRow>> {
    let vocab = clusters.vocab_size();
    let d = router.input_size() / 2;
    let scores: Vec<Vec<f32>> =
        held.iter().map(|h| router.scores(&h.input[..d], &h.input[d..])).collect::<Result<Vec<_>>>()?;
    let mut rows = Vec::new();
    for &k in budgets.iter().filter(|&&k| k >= 1 && k <= clusters.len()) {
        let (mut size, mut mass, mut hit) = (0.0, 0.0, 0.0);
        let mut inside = vec![false; vocab];
        for (h, s) in held.iter().zip(&scores) {
            inside.iter_mut().for_each(|x| *x = false);
            let mut n = 0usize;
            for m in top_k(s, k) {
                for &t in clusters.members(m as usize) {
                    inside[t as usize] = true;
                    n += 1;
                }
            }
            n += eos.iter().filter(|&&e| !std::mem::replace(&mut inside[e as usize], true)).count();
            size += n as f64;
            mass += h.top.iter().filter(|(t, _)| inside[*t as usize]).map(|&(_, p)| f64::from(p)).sum::<f64>();
            hit += f64::from(u8::from(inside[h.top[0].0 as usize]));
        }
        let count = held.len() as f64;
        let mean_size = size / count;
        let fr_size = (mean_size.round() as usize).clamp(1, vocab);
        let mut fr = vec![false; vocab];
        ranking[..fr_size].iter().chain(eos).for_each(|&t| fr[t as usize] = true);
        let fr_mass: f64 = held
            .iter()
            .map(|h| h.top.iter().filter(|(t, _)| fr[*t as usize]).map(|&(_, p)| f64::from(p)).sum::<f64>())
            .sum();
        let fr_hit: f64 = held.iter().map(|h| f64::from(u8::from(fr[h.top[0].0 as usize]))).sum();
        rows.push(RecallRow {
            clusters: k,
            mean_size,
            vocab_share: mean_size / vocab as f64,
            target_mass: mass / count,
            top1_hit: hit / count,
            fr_target_mass: fr_mass / count,
            fr_top1_hit: fr_hit / count,
        });
    }
    Ok(rows)
}

fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut out: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let sum: f32 = out.iter().sum();
    out.iter_mut().for_each(|p| *p /= sum);
    out
}

/// The most likely tokens, best first, until `mass` is covered or `most` are taken.
fn top_mass(probs: &[f32], mass: f32, most: usize) -> Vec<(u32, f32)> {
    let mut out = Vec::new();
    let mut covered = 0.0;
    for t in top_k(probs, most) {
        let p = probs[t as usize];
        out.push((t, p));
        covered += p;
        if covered >= mass {
            break;
        }
    }
    out
}
