//! The EAGLE-style feature drafter DynaSpec's experiments shortlist (dynaspec.txt §6: "we build
//! on EAGLE"): building it from corpus text, and its artifact.
//!
//! **Build.** The target reads the text in windows (or each chat whole, the answer after its
//! templated prompt, [`build_eagle_on_chats`]); at every position it gives its final-norm
//! hidden state `f_i` and its greedy next token `y_i`. `anyspec-train`'s `train_eagle` fits the
//! drafter (`fc` over `[E(x_{i+1}); f_i]`, one decoder layer, a final norm) to predict
//! `f_{i+1}` (smooth-L1) and, through the target's frozen head restricted to the corpus's most
//! frequent tokens, `y_{i+1}` (cross-entropy), as EAGLE §4.2 does.
//!
//! **Artifact.** One safetensors file: the drafter's tensors (f16, Hugging Face names `fc.weight`,
//! `fc.bias`, `layers.0.…`, `norm.weight`) and metadata `format` (`anyspec-eagle`),
//! `format_version`, `model_fingerprint` (the target's, [`model_fingerprint`]), `layers`, how it
//! was built (corpus, `data_digest`, positions, epochs, window, shortlist size), the `loss_log`,
//! the held-out `valid_accuracy` per epoch, and `checksum` (SHA-256 of every other entry and
//! every tensor's bytes). Written atomically, refused against another target.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyspec_core::artifact::{SafetensorsVector, artifact_checksum, serialize_safetensors};
use anyspec_core::{Progress, ProgressUnit};
use anyspec_models::{FeatureTensors, Llama};
use anyspec_train::{EagleFrozen, EagleShape, EagleTrainConfig, FeatureData, FeatureSequence, train_eagle};
use safetensors::{Dtype, SafeTensors};

use crate::artifact::{checked_metadata, data_digest, model_fingerprint, save_bytes, verify_checksum};
use crate::error::{Error, Result};

/// The `format` metadata value of every EAGLE drafter file.
pub const EAGLE_FORMAT: &str = "anyspec-eagle";
/// The format version this build writes and reads.
pub const EAGLE_FORMAT_VERSION: u32 = 1;

/// How an EAGLE drafter was built, as recorded in its file.
#[derive(Clone, Debug, PartialEq)]
pub struct EagleInfo {
    /// [`model_fingerprint`] of the target whose features it reads.
    pub model_fingerprint: String,
    /// The target's hidden size.
    pub hidden_size: usize,
    /// Decoder layers of the drafter.
    pub layers: usize,
    /// The corpus files read.
    pub corpus: String,
    /// SHA-256 of the training token ids ([`data_digest`]).
    pub data_digest: String,
    /// Training positions.
    pub positions: usize,
    /// Training epochs.
    pub epochs: usize,
    /// Training window (steps).
    pub window: usize,
    /// Tokens of the cross-entropy's shortlist.
    pub ce_shortlist: usize,
    /// Mean training loss per epoch.
    pub loss_log: Vec<f32>,
    /// Held-out top-1 agreement with the target per epoch (a proxy of first-token acceptance).
    pub valid_accuracy: Vec<f32>,
}

/// A trained EAGLE drafter: its tensors and how they were made.
#[derive(Clone, Debug, PartialEq)]
pub struct EagleFile {
    /// Build record.
    pub info: EagleInfo,
    /// The drafter's weights by name (`Llama::feature_model` takes them).
    pub tensors: FeatureTensors,
}

/// How an EAGLE drafter is built.
#[derive(Clone, Debug, PartialEq)]
pub struct EagleBuildParams {
    /// The target reads the text in windows of at most this many tokens (one pass each; at most
    /// its context window).
    pub capture_window: usize,
    /// Stop reading text after this many positions (training and held-out together).
    pub max_positions: usize,
    /// Every `valid_every`-th window (or chat) is held out.
    pub valid_every: usize,
    /// Chats ([`build_eagle_on_chats`]): prompt steps kept before each answer.
    pub prompt_context: usize,
    /// The cross-entropy runs over the corpus's most frequent `ce_shortlist` tokens.
    pub ce_shortlist: usize,
    /// The training (`anyspec-train`).
    pub train: EagleTrainConfig,
    /// What the corpus was (recorded in the artifact).
    pub corpus: String,
}

impl Default for EagleBuildParams {
    fn default() -> Self {
        EagleBuildParams {
            capture_window: 256,
            max_positions: 60_000,
            valid_every: 10,
            prompt_context: 64,
            ce_shortlist: 8192,
            train: EagleTrainConfig { window: 128, ..EagleTrainConfig::default() },
            corpus: String::new(),
        }
    }
}

/// What a build measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EagleReport {
    /// Training positions.
    pub train_positions: usize,
    /// Held-out positions.
    pub valid_positions: usize,
    /// Training loss per epoch.
    pub loss_log: Vec<f32>,
    /// Held-out loss per epoch.
    pub valid_loss_log: Vec<f32>,
    /// Held-out top-1 agreement with the target per epoch.
    pub valid_accuracy: Vec<f32>,
    /// Seconds: reading the text with the target, training.
    pub seconds: (f64, f64),
}

/// One chat for [`build_eagle_on_chats`]: the prompt through the target's chat template, then
/// the target's answer, as token ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EagleChat {
    /// The whole conversation: templated prompt, then answer.
    pub tokens: Vec<u32>,
    /// Index in `tokens` of the answer's first token.
    pub answer_start: usize,
}

/// Builds an EAGLE drafter for `target` from tokenized `texts`, read in windows of
/// `params.capture_window` tokens.
///
/// # Errors
/// [`Error::InvalidArgument`] for settings out of range, too little text, or a failed training.
pub fn build_eagle(
    target: &Llama,
    texts: &[Vec<u32>],
    params: &EagleBuildParams,
    progress: &dyn Progress,
) -> Result<(EagleFile, EagleReport)> {
    check_params(params)?;
    // A window is one pass of the target: no longer than its context.
    let capture_window = params.capture_window.min(target.config().max_position_embeddings);
    let captures: Vec<Capture<'_>> = texts
        .iter()
        .flat_map(|t| t.chunks(capture_window))
        .filter(|w| w.len() >= 3)
        .map(|tokens| Capture { tokens, keep_from: 0 })
        .collect();
    let unit = format!("window of {capture_window} tokens");
    build_from_captures(target, &captures, &unit, params, progress)
}

/// Builds an EAGLE drafter for `target` from chats, each read whole in one pass: the target's
/// features at the answer then carry the prompt, as they do when the drafter drafts an answer
/// (`anyspec demo`). Training keeps the answer's steps and the `params.prompt_context` steps
/// before it (a drafter that restarts its cache keeps that many true pairs of the context,
/// prompt included, at the start of an answer).
///
/// # Errors
/// As [`build_eagle`], and for a chat longer than the target's context or whose answer is
/// empty or starts past its end.
pub fn build_eagle_on_chats(
    target: &Llama,
    chats: &[EagleChat],
    params: &EagleBuildParams,
    progress: &dyn Progress,
) -> Result<(EagleFile, EagleReport)> {
    check_params(params)?;
    let context = target.config().max_position_embeddings;
    let mut captures = Vec::with_capacity(chats.len());
    for (i, chat) in chats.iter().enumerate() {
        if chat.tokens.len() > context {
            return Err(Error::invalid(format!(
                "chat {} has {} tokens, more than the model's context of {context}; leave it out or shorten its prompt",
                i + 1,
                chat.tokens.len()
            )));
        }
        if chat.answer_start == 0 || chat.answer_start >= chat.tokens.len() {
            return Err(Error::invalid(format!(
                "chat {} has no prompt or no answer (answer at token {} of {})",
                i + 1,
                chat.answer_start,
                chat.tokens.len()
            )));
        }
        captures.push(Capture {
            tokens: &chat.tokens,
            keep_from: chat.answer_start.saturating_sub(params.prompt_context.max(1)),
        });
    }
    build_from_captures(target, &captures, "chat", params, progress)
}

fn check_params(params: &EagleBuildParams) -> Result<()> {
    if params.capture_window < 3 || params.valid_every < 2 || params.max_positions == 0 {
        return Err(Error::invalid(
            "capture_window must be at least 3, valid_every at least 2 and max_positions positive",
        ));
    }
    if params.ce_shortlist == 0 {
        return Err(Error::invalid("ce_shortlist must be positive"));
    }
    Ok(())
}

/// One pass of the target over `tokens`; training keeps positions `keep_from..`.
struct Capture<'a> {
    tokens: &'a [u32],
    keep_from: usize,
}

/// Reads every capture with the target (every `valid_every`-th held out) and trains; `unit`
/// names a capture in errors.
fn build_from_captures(
    target: &Llama,
    captures: &[Capture<'_>],
    unit: &str,
    params: &EagleBuildParams,
    progress: &dyn Progress,
) -> Result<(EagleFile, EagleReport)> {
    let c = target.config().clone();
    let (vocab, d) = (c.vocab_size, c.hidden_size);
    let model_err = |e: anyspec_models::Error| Error::invalid(e.to_string());
    let t0 = Instant::now();
    let (mut train, mut valid) = (Vec::new(), Vec::new());
    let (mut train_positions, mut valid_positions) = (0usize, 0usize);
    let mut frequency = vec![0u64; vocab];
    progress.start("reading the corpus with the target", Some(params.max_positions as u64), ProgressUnit::Items);
    for (w, capture) in captures.iter().enumerate() {
        if train_positions + valid_positions >= params.max_positions {
            break;
        }
        let rows = target
            .forward_with_hidden(capture.tokens, &mut target.new_cache(), capture.tokens.len(), None)
            .map_err(model_err)?;
        let kept = capture.keep_from..capture.tokens.len();
        let n = kept.len();
        let labels: Vec<u32> = rows.logits[kept.clone()].iter().map(|l| argmax(l)).collect();
        let sequence = FeatureSequence {
            tokens: capture.tokens[kept.clone()].to_vec(),
            features: rows.hidden[kept].concat(),
            labels: labels.clone(),
        };
        if w % params.valid_every == params.valid_every - 1 {
            valid_positions += n;
            valid.push(sequence);
        } else {
            labels.iter().for_each(|&t| frequency[t as usize] += 1);
            train_positions += n;
            train.push(sequence);
        }
        progress.advance(n as u64);
    }
    progress.finish();
    if train.is_empty() || valid.is_empty() {
        return Err(Error::invalid(format!(
            "the corpus gave {train_positions} training and {valid_positions} held-out positions; give more text \
             (every {}th {unit} is held out)",
            params.valid_every
        )));
    }
    let read_seconds = t0.elapsed().as_secs_f64();
    let digest = data_digest(train.iter().map(|s| s.tokens.as_slice()));
    let mut ranking: Vec<u32> = (0..vocab as u32).collect();
    ranking.sort_by(|a, b| frequency[*b as usize].cmp(&frequency[*a as usize]).then(a.cmp(b)));
    ranking.truncate(params.ce_shortlist.min(vocab));

    let t1 = Instant::now();
    let head = target.lm_head_rows().map_err(model_err)?;
    let fingerprint = model_fingerprint(vocab, d, &head);
    let embeddings = target.embedding_rows().map_err(model_err)?;
    let final_norm = target.final_norm_weight().map_err(model_err)?;
    let frozen = EagleFrozen {
        embeddings: &embeddings,
        head: &head,
        vocab_size: vocab,
        shortlist: &ranking,
        final_norm: &final_norm,
    };
    let shape = EagleShape {
        hidden_size: d,
        num_heads: c.num_heads,
        num_kv_heads: c.num_kv_heads,
        head_dim: c.head_dim,
        intermediate_size: c.intermediate_size,
        rope_theta: c.rope_theta,
        rms_norm_eps: c.rms_norm_eps,
    };
    let train = FeatureData { sequences: train, hidden_size: d };
    let valid = FeatureData { sequences: valid, hidden_size: d };
    let device = burn::tensor::Device::flex();
    let weights = train_eagle(&train, Some(&valid), &frozen, &shape, &params.train, &device, progress)
        .map_err(|e| Error::invalid(format!("training the EAGLE drafter failed: {e}")))?;
    let train_seconds = t1.elapsed().as_secs_f64();
    let info = EagleInfo {
        model_fingerprint: fingerprint,
        hidden_size: d,
        layers: 1,
        corpus: params.corpus.clone(),
        data_digest: digest,
        positions: train_positions,
        epochs: params.train.epochs,
        window: params.train.window,
        ce_shortlist: ranking.len(),
        loss_log: weights.loss_log.clone(),
        valid_accuracy: weights.valid_accuracy_log.clone(),
    };
    let tensors =
        weights.tensors.iter().map(|(name, shape, values)| (name.clone(), (shape.clone(), values.clone()))).collect();
    let report = EagleReport {
        train_positions,
        valid_positions,
        loss_log: weights.loss_log,
        valid_loss_log: weights.valid_loss_log,
        valid_accuracy: weights.valid_accuracy_log,
        seconds: (read_seconds, train_seconds),
    };
    Ok((EagleFile { info, tensors }, report))
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

impl EagleFile {
    /// The file's bytes (safetensors, tensors by name, fixed header order), every tensor stored
    /// as f16: half the size of f32, and finer than the q8_0 the runtime stores it as.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut names: Vec<&String> = self.tensors.keys().collect();
        names.sort();
        let bytes: Vec<Vec<u8>> = names
            .iter()
            .map(|n| self.tensors[*n].1.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect())
            .collect();
        let tensors: Vec<SafetensorsVector<'_>> =
            names.iter().zip(&bytes).map(|(n, b)| (n.as_str(), "F16", b.len() / 2, b.as_slice())).collect();
        let mut metadata = self.metadata();
        let sum = artifact_checksum(&metadata, tensors.iter().map(|&(n, _, _, d)| (n, d)));
        metadata.insert("checksum".into(), sum);
        serialize_safetensors(&tensors, &metadata)
    }

    /// Writes the drafter to `path` atomically.
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn save(&self, path: &Path) -> Result<()> {
        save_bytes(path, &self.to_bytes())
    }

    /// Reads a drafter and checks it was built for the target of fingerprint `expected_model`.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::NotAnArtifact`], [`Error::Version`], [`Error::Corrupt`],
    /// [`Error::WrongModel`] for a drafter of another target.
    pub fn load(path: &Path, expected_model: &str) -> Result<EagleFile> {
        let file = EagleFile::load_unchecked(path)?;
        if file.info.model_fingerprint != expected_model {
            return Err(Error::WrongModel {
                path: path.to_path_buf(),
                built_for: file.info.model_fingerprint,
                given: expected_model.to_string(),
            });
        }
        Ok(file)
    }

    /// Reads a drafter without comparing it with a target, to inspect it.
    ///
    /// # Errors
    /// As [`EagleFile::load`] except [`Error::WrongModel`].
    pub fn load_unchecked(path: &Path) -> Result<EagleFile> {
        let bytes = std::fs::read(path).map_err(Error::io("read", path))?;
        EagleFile::from_bytes(&bytes, path)
    }

    /// Parses a file's bytes; `path` only names the source in errors.
    ///
    /// # Errors
    /// As [`EagleFile::load`] except [`Error::WrongModel`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<EagleFile> {
        let corrupt = |problem: String| Error::Corrupt { path: path.to_path_buf(), problem };
        let not_eagle = |found| Error::NotAnArtifact { path: path.to_path_buf(), found };
        if bytes.len() <= 8 || bytes[8] != b'{' {
            return Err(not_eagle(anyspec_core::artifact::ArtifactKind::describe(bytes)));
        }
        let metadata = checked_metadata(bytes, path, EAGLE_FORMAT, EAGLE_FORMAT_VERSION)?;
        let parsed = SafeTensors::deserialize(bytes).map_err(|e| corrupt(format!("truncated or malformed ({e})")))?;
        let mut names: Vec<String> = parsed.names().into_iter().map(str::to_owned).collect();
        names.sort();
        let mut views = Vec::with_capacity(names.len());
        for name in &names {
            let view = parsed.tensor(name).map_err(|e| corrupt(format!("tensor {name}: {e}")))?;
            if !matches!(view.dtype(), Dtype::F16 | Dtype::F32) {
                return Err(corrupt(format!("tensor {name} is {:?}, expected F16 (or F32)", view.dtype())));
            }
            views.push(view);
        }
        verify_checksum(&metadata, names.iter().map(String::as_str).zip(views.iter().map(|v| v.data())), path)?;
        let info = info_of(&metadata).map_err(&corrupt)?;
        let mut tensors = FeatureTensors::new();
        for (name, view) in names.into_iter().zip(views) {
            let values: Vec<f32> = match view.dtype() {
                Dtype::F16 => {
                    view.data().chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
                }
                _ => view.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            };
            // Stored flat; the shape is in the metadata.
            let key = format!("shape:{name}");
            let shape: Vec<usize> = metadata
                .get(&key)
                .ok_or_else(|| corrupt(format!("metadata entry {key} is missing")))?
                .split(',')
                .map(|v| v.trim().parse::<usize>())
                .collect::<std::result::Result<_, _>>()
                .map_err(|_| corrupt(format!("metadata entry {key} does not parse")))?;
            if shape.iter().product::<usize>() != values.len() {
                return Err(corrupt(format!(
                    "tensor {name} has {} values, its shape {shape:?} needs another count",
                    values.len()
                )));
            }
            tensors.insert(name, (shape, values));
        }
        Ok(EagleFile { info, tensors })
    }

    fn metadata(&self) -> BTreeMap<String, String> {
        let i = &self.info;
        let list = |v: &[f32]| format!("[{}]", v.iter().map(|l| format!("{l}")).collect::<Vec<_>>().join(","));
        [
            ("format", EAGLE_FORMAT.to_string()),
            ("format_version", EAGLE_FORMAT_VERSION.to_string()),
            ("model_fingerprint", i.model_fingerprint.clone()),
            ("hidden_size", i.hidden_size.to_string()),
            ("layers", i.layers.to_string()),
            ("corpus", i.corpus.clone()),
            ("data_digest", i.data_digest.clone()),
            ("positions", i.positions.to_string()),
            ("epochs", i.epochs.to_string()),
            ("window", i.window.to_string()),
            ("ce_shortlist", i.ce_shortlist.to_string()),
            ("loss_log", list(&i.loss_log)),
            ("valid_accuracy", list(&i.valid_accuracy)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain(self.tensors.iter().map(|(name, (shape, _))| {
            (format!("shape:{name}"), shape.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
        }))
        .collect()
    }
}

fn info_of(m: &BTreeMap<String, String>) -> std::result::Result<EagleInfo, String> {
    fn field<T: std::str::FromStr>(m: &BTreeMap<String, String>, key: &str) -> std::result::Result<T, String> {
        let raw = m.get(key).ok_or_else(|| format!("metadata entry {key} is missing"))?;
        raw.parse().map_err(|_| format!("metadata entry {key} = {raw:?} does not parse"))
    }
    let list = |key: &str| -> std::result::Result<Vec<f32>, String> {
        let raw: String = field(m, key)?;
        raw.trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.trim().parse::<f32>().map_err(|_| format!("metadata entry {key} = {raw:?} does not parse")))
            .collect()
    };
    Ok(EagleInfo {
        model_fingerprint: field(m, "model_fingerprint")?,
        hidden_size: field(m, "hidden_size")?,
        layers: field(m, "layers")?,
        corpus: field(m, "corpus")?,
        data_digest: field(m, "data_digest")?,
        positions: field(m, "positions")?,
        epochs: field(m, "epochs")?,
        window: field(m, "window")?,
        ce_shortlist: field(m, "ce_shortlist")?,
        loss_log: list("loss_log")?,
        valid_accuracy: list("valid_accuracy")?,
    })
}
