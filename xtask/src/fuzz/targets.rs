//! One fuzz target per loader: its valid seed inputs (built in memory from the committed test
//! data, or read from it), the repair of its checksums (so that mutations reach the parser
//! behind them), and what it runs on an input.
//!
//! `run` returns `Err` with the loader's message when the loader refuses the input, the expected
//! outcome for most mutants; a panic, an abort, a hang or an allocation past the cap is a
//! finding.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use anyspec_affinity::{
    Affinity, AffinityParams, CooccurrenceCounts, EosRule, Shortlist, ShortlistParams, TokenFrequencies, build_affinity,
};
use anyspec_core::NoProgress;
use anyspec_dict_builder::{BuildParams, CorpusOptions, Dictionary, NgramCounts, build_dictionary};
use anyspec_gguf::tokenizer::{apply_chat_template, tokenizer_from_gguf, tokenizer_from_gguf_checked};
use anyspec_gguf::{GgmlType, GgufFile, GgufWriter, MetadataValue};
use anyspec_models::{Checkpoint, LlamaConfig, TextTokenizer};
use anyspec_vocab_map::{Fingerprint, MatchMode, VocabMap, Vocabulary};
use rand::Rng;
use rand::rngs::StdRng;
use sha2::{Digest, Sha256};

/// The targets `cargo xtask fuzz` runs by default, with what each feeds its input to.
pub(crate) const TARGETS: &[(&str, &str)] = &[
    (
        "gguf",
        "anyspec_gguf::GgufFile::from_bytes, every tensor's data, the tokenizer built from the metadata \
         (encode, decode) and the chat template",
    ),
    (
        "gguf-model",
        "anyspec_models::Checkpoint::open on a .gguf file (the llama config mapping), its tokenizer, chat \
         prompt and tensor reads (dequantized, query/key permutation undone)",
    ),
    ("dictionary", "anyspec_dict_builder::Dictionary::from_bytes, then lookups"),
    ("count-shard", "NgramCounts::from_shard_bytes, then a dictionary built from the counts"),
    ("vocab-map", "anyspec_vocab_map::VocabMap::from_bytes"),
    ("affinity", "anyspec_affinity::Affinity::from_bytes, then its restriction to a drafter"),
    ("shortlist", "anyspec_affinity::Shortlist::from_bytes, then its mask"),
    ("config-json", "anyspec_models::LlamaConfig::from_json (config.json)"),
    (
        "safetensors",
        "anyspec_models::Checkpoint::open on a directory (config.json and model.safetensors), then tensor reads",
    ),
    (
        "tokenizer-json",
        "anyspec_vocab_map::Vocabulary::from_bytes (the tokenizers crate, the id table and fingerprint) and \
         anyspec_models::TextTokenizer::from_file, each then encoding and decoding",
    ),
];

/// Targets that test the harness itself; run only when named.
pub(crate) const SELF_TESTS: &[(&str, &str)] = &[
    ("selftest-panic", "panics on every mutant (the harness must report it)"),
    ("selftest-abort", "aborts the process on every mutant"),
    ("selftest-alloc", "asks for 1 TiB on every mutant (the memory cap must stop it)"),
    ("selftest-hang", "never returns on a mutant"),
];

/// Text that targets with a tokenizer encode and decode.
const SAMPLE: &str = "Hello, world! The 12 ab Добрий день\n\t<|im_start|>user";

/// A loader under test.
pub(crate) trait Target {
    /// The valid inputs that mutants start from.
    fn seeds(&self) -> &[Vec<u8>];
    /// Repairs what a mutation broke that the loader checks before parsing (checksums, total
    /// lengths), so that most mutants reach the parser; called on most mutants, not all.
    fn fix(&self, _rng: &mut StdRng, _bytes: &mut Vec<u8>) {}
    /// Feeds one input to the loader: `Err` with its message when it refuses the input.
    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String>;
}

/// The repository root (seeds are read from its committed test data).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> Result<Vec<u8>> {
    let path = repo_root().join(relative);
    std::fs::read(&path).with_context(|| format!("reading the fuzz seed {}", path.display()))
}

fn fail(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Builds target `name`; `work` is a scratch directory it may write files into.
pub(crate) fn make(name: &str, work: &Path) -> Result<Box<dyn Target>> {
    Ok(match name {
        "gguf" => Box::new(Gguf::new()?),
        "gguf-model" => Box::new(GgufModel::new(work)?),
        "dictionary" => Box::new(DictionaryTarget::new()?),
        "count-shard" => Box::new(CountShard::new()?),
        "vocab-map" => Box::new(VocabMapTarget::new()?),
        "affinity" => Box::new(AffinityTarget::new()?),
        "shortlist" => Box::new(ShortlistTarget::new()?),
        "config-json" => Box::new(ConfigJson::new()?),
        "safetensors" => Box::new(Safetensors::new(work)?),
        "tokenizer-json" => Box::new(TokenizerJson::new(work)?),
        "selftest-panic" | "selftest-abort" | "selftest-alloc" | "selftest-hang" => {
            Box::new(SelfTest { name: name.to_string(), seeds: vec![b"a valid input".to_vec()] })
        }
        other => anyhow::bail!(
            "no fuzz target named {other:?}; the targets are {}",
            TARGETS.iter().chain(SELF_TESTS).map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ),
    })
}

// ---------------------------------------------------------------------------------------------
// Checksum repairs.

/// A CRC-32 of everything before it in the last 4 bytes (dictionary, count shard).
fn fix_trailing_crc32(bytes: &mut [u8]) {
    if bytes.len() >= 4 {
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// magic (8), version (4), payload length (8), payload, SHA-256 of everything before it (32):
/// the vocabulary map and the shortlist. The length is repaired too, mostly.
fn fix_length_and_sha256(rng: &mut StdRng, bytes: &mut [u8]) {
    const HEADER: usize = 20;
    const SUM: usize = 32;
    if bytes.len() < HEADER + SUM {
        return;
    }
    if rng.random_bool(0.8) {
        let payload = (bytes.len() - HEADER - SUM) as u64;
        bytes[12..20].copy_from_slice(&payload.to_le_bytes());
    }
    let body = bytes.len() - SUM;
    let sum = Sha256::digest(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// GGUF.

fn strings(items: &[&str]) -> MetadataValue {
    MetadataValue::Array(items.iter().map(|&s| MetadataValue::from(s)).collect())
}

fn ints(items: &[i32]) -> MetadataValue {
    MetadataValue::Array(items.iter().map(|&v| MetadataValue::I32(v)).collect())
}

fn f32_bytes(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

/// A byte-level BPE vocabulary of 10 tokens with a chat template.
fn gpt2_tokenizer(w: &mut GgufWriter) {
    w.metadata("tokenizer.ggml.model", "gpt2".into())
        .metadata("tokenizer.ggml.pre", "smollm".into())
        .metadata(
            "tokenizer.ggml.tokens",
            strings(&["<|endoftext|>", "<|im_start|>", "a", "b", "Ġ", "1", "2", "ab", "Ġab", "12"]),
        )
        .metadata("tokenizer.ggml.token_type", ints(&[3, 3, 1, 1, 1, 1, 1, 1, 1, 1]))
        .metadata("tokenizer.ggml.merges", strings(&["a b", "Ġ ab", "1 2"]))
        .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(0))
        .metadata("tokenizer.ggml.eos_token_id", MetadataValue::U32(0))
        .metadata(
            "tokenizer.chat_template",
            "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
                .into(),
        );
}

/// A SentencePiece vocabulary whose merges come from the scores, with byte fallback.
fn spm_tokenizer(w: &mut GgufWriter) {
    let tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab", "<0x00>", "<0x21>", "<0xFF>"];
    let scores = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -5.0, -4.0, -0.5, 0.0, 0.0, 0.0];
    w.metadata("tokenizer.ggml.model", "llama".into())
        .metadata("tokenizer.ggml.tokens", strings(&tokens))
        .metadata(
            "tokenizer.ggml.scores",
            MetadataValue::Array(scores.iter().map(|&s| MetadataValue::F32(s)).collect()),
        )
        .metadata("tokenizer.ggml.token_type", ints(&[2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6]))
        .metadata("tokenizer.ggml.bos_token_id", MetadataValue::U32(1))
        .metadata("tokenizer.ggml.eos_token_id", MetadataValue::U32(2))
        .metadata("tokenizer.ggml.unknown_token_id", MetadataValue::U32(0));
}

/// A one-layer llama of width 8 (2 heads of 4, 1 key/value head, an MLP of 32), `vocab` rows,
/// with the metadata `Checkpoint::open` maps to a config, in F32, F16 and Q8_0.
fn tiny_llama(w: &mut GgufWriter, vocab: u64) -> Result<()> {
    let u32v = MetadataValue::U32;
    w.metadata("general.architecture", "llama".into())
        .metadata("general.name", "fuzz seed".into())
        .metadata("llama.block_count", u32v(1))
        .metadata("llama.context_length", u32v(64))
        .metadata("llama.embedding_length", u32v(8))
        .metadata("llama.feed_forward_length", u32v(32))
        .metadata("llama.attention.head_count", u32v(2))
        .metadata("llama.attention.head_count_kv", u32v(1))
        .metadata("llama.rope.dimension_count", u32v(4))
        .metadata("llama.rope.freq_base", MetadataValue::F32(10_000.0))
        .metadata("llama.attention.layer_norm_rms_epsilon", MetadataValue::F32(1e-5));
    let ramp = |n: u64| f32_bytes((0..n).map(|i| i as f32 / 16.0));
    w.tensor("token_embd.weight", &[8, vocab], GgmlType::F32, ramp(8 * vocab))?;
    w.tensor("output_norm.weight", &[8], GgmlType::F32, ramp(8))?;
    w.tensor("blk.0.attn_norm.weight", &[8], GgmlType::F32, ramp(8))?;
    // F16 ones.
    w.tensor("blk.0.attn_q.weight", &[8, 8], GgmlType::F16, [0x00, 0x3c].repeat(64))?;
    w.tensor("blk.0.attn_k.weight", &[8, 4], GgmlType::F32, ramp(32))?;
    // Q8_0: one block (a scale, then 32 signed bytes) per row of 32.
    let q8: Vec<u8> = (0..8).flat_map(|r: u8| [0x00, 0x3c].into_iter().chain((0..32).map(move |i| i ^ r))).collect();
    w.tensor("blk.0.ffn_down.weight", &[32, 8], GgmlType::Q8_0, q8)?;
    Ok(())
}

/// The GGUF seeds: a tokenizer-only file of each kind and the tiny llama with each tokenizer.
fn gguf_seeds() -> Result<Vec<Vec<u8>>> {
    let mut seeds = Vec::new();
    let mut w = GgufWriter::new();
    gpt2_tokenizer(&mut w);
    seeds.push(w.try_to_bytes()?);
    let mut w = GgufWriter::new();
    spm_tokenizer(&mut w);
    seeds.push(w.try_to_bytes()?);
    let mut w = GgufWriter::new();
    tiny_llama(&mut w, 10)?;
    gpt2_tokenizer(&mut w);
    seeds.push(w.try_to_bytes()?);
    let mut w = GgufWriter::new();
    tiny_llama(&mut w, 12)?;
    spm_tokenizer(&mut w);
    seeds.push(w.try_to_bytes()?);
    Ok(seeds)
}

struct Gguf {
    seeds: Vec<Vec<u8>>,
}

impl Gguf {
    fn new() -> Result<Self> {
        Ok(Gguf { seeds: gguf_seeds()? })
    }
}

impl Target for Gguf {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let file = GgufFile::from_bytes(bytes.to_vec()).map_err(fail)?;
        for info in file.tensors() {
            black_box(file.tensor_data(info));
        }
        black_box(file.architecture().ok());
        let tokenizer = tokenizer_from_gguf(&file).map_err(fail)?;
        black_box(tokenizer_from_gguf_checked(&file, 10).ok());
        let encoding = tokenizer.tokenizer.encode(SAMPLE, tokenizer.add_bos).map_err(fail)?;
        tokenizer.tokenizer.decode(encoding.get_ids(), false).map_err(fail)?;
        if let Some(template) = &tokenizer.chat_template {
            apply_chat_template(template, Some("Be brief."), "Hi").map_err(fail)?;
        }
        Ok(())
    }
}

struct GgufModel {
    seeds: Vec<Vec<u8>>,
    path: PathBuf,
}

impl GgufModel {
    fn new(work: &Path) -> Result<Self> {
        Ok(GgufModel { seeds: gguf_seeds()?.split_off(2), path: work.join("model.gguf") })
    }
}

impl Target for GgufModel {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        std::fs::write(&self.path, bytes).map_err(fail)?;
        let checkpoint = Checkpoint::open(&self.path).map_err(fail)?;
        black_box(checkpoint.chat_prompt(Some("Be brief."), "Hi").ok());
        if let Ok(tokenizer) = checkpoint.tokenizer() {
            let ids = tokenizer.encode(SAMPLE).map_err(fail)?;
            black_box(tokenizer.decode(&ids).ok());
        }
        let c = checkpoint.config().clone();
        let heads = c.num_heads.checked_mul(c.head_dim);
        let kv = c.num_kv_heads.checked_mul(c.head_dim);
        let reads = [
            ("model.embed_tokens.weight", Some(c.vocab_size), Some(c.hidden_size)),
            ("model.norm.weight", Some(c.hidden_size), None),
            ("model.layers.0.self_attn.q_proj.weight", heads, Some(c.hidden_size)),
            ("model.layers.0.self_attn.k_proj.weight", kv, Some(c.hidden_size)),
            ("model.layers.0.mlp.down_proj.weight", Some(c.hidden_size), Some(c.intermediate_size)),
        ];
        let mut refused = None;
        for (name, rows, cols) in reads {
            let Some(rows) = rows else { continue };
            let shape: Vec<usize> = std::iter::once(rows).chain(cols).collect();
            if let Err(e) = checkpoint.tensor_f32(name, &shape) {
                refused.get_or_insert(e.to_string());
            }
        }
        refused.map_or(Ok(()), Err)
    }
}

// ---------------------------------------------------------------------------------------------
// Dictionary and count shard.

/// The dict-builder's committed tokenizer and corpus.
fn dict_vocabulary() -> Result<Vocabulary> {
    Ok(Vocabulary::from_file(&repo_root().join("crates/dict-builder/tests/data/tokenizer.json"))?)
}

fn dict_corpus() -> PathBuf {
    repo_root().join("crates/dict-builder/tests/data/corpus.txt")
}

fn count_corpus(max_order: usize) -> Result<NgramCounts> {
    Ok(NgramCounts::count_files(&[dict_corpus()], &CorpusOptions::default(), max_order, 1, &NoProgress)?)
}

struct DictionaryTarget {
    seeds: Vec<Vec<u8>>,
    fingerprint: Fingerprint,
    /// Token-id contexts to look up, from the corpus.
    contexts: Vec<Vec<u32>>,
}

impl DictionaryTarget {
    fn new() -> Result<Self> {
        let vocabulary = dict_vocabulary()?;
        let counts = count_corpus(3)?;
        let mut seeds = vec![build_dictionary(&counts, &vocabulary, &BuildParams::default(), 1, &NoProgress)?];
        let strict = BuildParams { min_prob: 0.55, max_prefix: 2, ..BuildParams::default() };
        seeds.push(build_dictionary(&counts, &vocabulary, &strict, 1, &NoProgress)?);
        let text = std::fs::read_to_string(dict_corpus())?;
        let ids = vocabulary
            .tokenizer()
            .encode(text.chars().take(400).collect::<String>(), false)
            .map_err(anyhow::Error::msg)?;
        let ids = ids.get_ids();
        let contexts = (1..ids.len()).step_by(7).map(|end| ids[end.saturating_sub(6)..end].to_vec()).collect();
        Ok(DictionaryTarget { seeds, fingerprint: vocabulary.fingerprint(), contexts })
    }
}

/// The dictionary's fixed header: magic, version, fingerprint, the info, FST and blob lengths.
const DICT_HEADER: usize = 64;

impl Target for DictionaryTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, rng: &mut StdRng, bytes: &mut Vec<u8>) {
        // Mostly, make the blob take up whatever the lengths of the other sections leave.
        if bytes.len() >= DICT_HEADER + 4 && rng.random_bool(0.7) {
            let info = u64::from(u32::from_le_bytes(bytes[44..48].try_into().unwrap_or([0; 4])));
            let fst = u64::from_le_bytes(bytes[48..56].try_into().unwrap_or([0; 8]));
            let rest = (bytes.len() - DICT_HEADER - 4) as u64;
            if let Some(blob) = rest.checked_sub(info).and_then(|r| r.checked_sub(fst)) {
                bytes[56..64].copy_from_slice(&blob.to_le_bytes());
            }
        }
        fix_trailing_crc32(bytes);
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let dictionary =
            Dictionary::from_bytes(bytes.to_vec(), Path::new("fuzz.dict"), &self.fingerprint).map_err(fail)?;
        let mut out = Vec::new();
        for context in &self.contexts {
            black_box(dictionary.longest_suffix_match(context, 8, &mut out));
            black_box(dictionary.get(context));
        }
        black_box(dictionary.longest_suffix_match(&[u32::MAX, 0, 1, 65535, 65536], usize::MAX, &mut out));
        Ok(())
    }
}

struct CountShard {
    seeds: Vec<Vec<u8>>,
    vocabulary: Vocabulary,
}

impl CountShard {
    fn new() -> Result<Self> {
        let seeds = vec![count_corpus(3)?.to_shard_bytes(), count_corpus(1)?.to_shard_bytes()];
        Ok(CountShard { seeds, vocabulary: dict_vocabulary()? })
    }
}

impl Target for CountShard {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, _rng: &mut StdRng, bytes: &mut Vec<u8>) {
        fix_trailing_crc32(bytes);
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let counts = NgramCounts::from_shard_bytes(bytes, Path::new("fuzz.counts")).map_err(fail)?;
        let params = BuildParams { orders: (1..=counts.max_order()).collect(), ..BuildParams::default() };
        build_dictionary(&counts, &self.vocabulary, &params, 1, &NoProgress).map_err(fail)?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Vocabulary map, affinity, shortlist.

fn vocab_fixture(name: &str) -> Result<Vocabulary> {
    Ok(Vocabulary::from_file(&repo_root().join("crates/vocab-map/tests/data").join(name))?)
}

struct VocabMapTarget {
    seeds: Vec<Vec<u8>>,
}

impl VocabMapTarget {
    fn new() -> Result<Self> {
        let bytelevel = vocab_fixture("tiny_bytelevel.json")?;
        let sentencepiece = vocab_fixture("tiny_sentencepiece.json")?;
        let wordpiece = vocab_fixture("wordpiece.json")?;
        let seeds = vec![
            VocabMap::build(&bytelevel, &sentencepiece, MatchMode::Bytes).to_bytes()?,
            VocabMap::build(&sentencepiece, &bytelevel, MatchMode::Raw).to_bytes()?,
            VocabMap::build(&wordpiece, &bytelevel, MatchMode::Bytes).to_bytes()?,
        ];
        Ok(VocabMapTarget { seeds })
    }
}

impl Target for VocabMapTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, rng: &mut StdRng, bytes: &mut Vec<u8>) {
        fix_length_and_sha256(rng, bytes);
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let map = VocabMap::from_bytes(bytes, Path::new("fuzz.asvm")).map_err(fail)?;
        black_box(map.intersection());
        Ok(())
    }
}

/// The affinity crate's committed tokenizer and corpus.
fn affinity_data(name: &str) -> PathBuf {
    repo_root().join("crates/affinity/tests/data").join(name)
}

struct AffinityTarget {
    seeds: Vec<Vec<u8>>,
}

impl AffinityTarget {
    fn new() -> Result<Self> {
        let vocabulary = Vocabulary::from_file(&affinity_data("tokenizer.json"))?;
        let mut seeds = Vec::new();
        for (window, top_k) in [(3, 8), (2, 2)] {
            let params =
                AffinityParams { window, tau: 0.5, top_k, min_count: 2, threads: 1, ..AffinityParams::default() };
            let counts = CooccurrenceCounts::count_files(
                &[affinity_data("corpus.txt")],
                &CorpusOptions::default(),
                &vocabulary,
                params.window,
                params.max_pairs,
                1,
                &NoProgress,
            )?;
            seeds.push(build_affinity(&counts, vocabulary.fingerprint(), &params, "corpus.txt")?.to_bytes()?);
        }
        Ok(AffinityTarget { seeds })
    }
}

/// Recomputes the affinity checksum (a SHA-256 over the metadata less `checksum` and the four
/// tensors, each piece length-prefixed) and writes the header back with it.
fn fix_affinity(bytes: &mut Vec<u8>) {
    let Some(n) = bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))) else { return };
    let Some(end) = usize::try_from(n).ok().and_then(|n| n.checked_add(8)).filter(|&e| e <= bytes.len()) else {
        return;
    };
    let Ok(mut header) = serde_json::from_slice::<serde_json::Value>(&bytes[8..end]) else { return };
    let data = &bytes[end..];
    let Some(metadata) = header.get("__metadata__").and_then(|m| m.as_object()) else { return };
    let mut unsigned = BTreeMap::new();
    for (k, v) in metadata {
        let Some(v) = v.as_str() else { return };
        if k != "checksum" {
            unsigned.insert(k.clone(), v.to_string());
        }
    }
    let mut hasher = Sha256::new();
    let mut piece = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    for (k, v) in &unsigned {
        piece(k.as_bytes());
        piece(v.as_bytes());
    }
    for name in ["row_offsets", "columns", "values", "scores"] {
        let offsets = header.get(name).and_then(|t| t.get("data_offsets")).and_then(|o| o.as_array());
        let range = offsets.and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)));
        let Some(slice) = range.and_then(|(a, b)| data.get(usize::try_from(a).ok()?..usize::try_from(b).ok()?)) else {
            return;
        };
        piece(name.as_bytes());
        piece(slice);
    }
    let sum = hex(&hasher.finalize());
    header["__metadata__"]["checksum"] = serde_json::Value::String(sum);
    let Ok(mut text) = serde_json::to_string(&header) else { return };
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    let mut fixed = (text.len() as u64).to_le_bytes().to_vec();
    fixed.extend_from_slice(text.as_bytes());
    fixed.extend_from_slice(data);
    *bytes = fixed;
}

impl Target for AffinityTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, _rng: &mut StdRng, bytes: &mut Vec<u8>) {
        fix_affinity(bytes);
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let affinity = Affinity::from_bytes(bytes, Path::new("fuzz.affinity")).map_err(fail)?;
        black_box(affinity.rows_with_entries());
        let in_drafter: Vec<bool> = (0..affinity.info().vocab_size).map(|i| i % 3 != 1).collect();
        affinity.restricted_to_drafter(&in_drafter).map_err(fail)?;
        Ok(())
    }
}

struct ShortlistTarget {
    seeds: Vec<Vec<u8>>,
}

impl ShortlistTarget {
    fn new() -> Result<Self> {
        let vocabulary = Vocabulary::from_file(&affinity_data("tokenizer.json"))?;
        let frequencies = TokenFrequencies::count_files(
            &[affinity_data("corpus.txt")],
            &CorpusOptions::default(),
            &vocabulary,
            1,
            &NoProgress,
        )?;
        let mut seeds = Vec::new();
        for (size, keep_special) in [(20, false), (64, true)] {
            let params = ShortlistParams { size, keep_special, eos: EosRule::Auto };
            seeds.push(Shortlist::build(&vocabulary, &frequencies, &params, "corpus.txt")?.to_bytes()?);
        }
        Ok(ShortlistTarget { seeds })
    }
}

impl Target for ShortlistTarget {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn fix(&self, rng: &mut StdRng, bytes: &mut Vec<u8>) {
        fix_length_and_sha256(rng, bytes);
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let shortlist = Shortlist::from_bytes(bytes, Path::new("fuzz.shortlist")).map_err(fail)?;
        black_box(shortlist.mask());
        black_box(shortlist.coverage());
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Hugging Face checkpoints: config.json, safetensors, tokenizer.json.

struct ConfigJson {
    seeds: Vec<Vec<u8>>,
}

impl ConfigJson {
    fn new() -> Result<Self> {
        let seeds = [
            "crates/models/tests/data/llama3-gqa/config.json",
            "crates/models/tests/data/mistral-window-f16/config.json",
            "crates/models/tests/data/qwen2-tied-bf16/config.json",
            "crates/drafters/tests/data/hetero-drafter/config.json",
            "assets/demo/target/config.json",
        ]
        .iter()
        .map(|p| read(p))
        .collect::<Result<_>>()?;
        Ok(ConfigJson { seeds })
    }
}

impl Target for ConfigJson {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        let text = std::str::from_utf8(bytes).map_err(fail)?;
        LlamaConfig::from_json(text).map_err(fail)?;
        Ok(())
    }
}

/// The config of the safetensors target's checkpoint: width 4, 2 heads of 2, 1 key/value head.
const TINY_CONFIG: &str = r#"{"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 8,
"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32,
"eos_token_id": 1, "bos_token_id": 0, "tie_word_embeddings": false}"#;

/// The tensors the safetensors target reads, with their shapes under `TINY_CONFIG`.
const TINY_TENSORS: [(&str, [usize; 2]); 6] = [
    ("model.embed_tokens.weight", [8, 4]),
    ("lm_head.weight", [8, 4]),
    ("model.norm.weight", [4, 0]),
    ("model.layers.0.self_attn.q_proj.weight", [4, 4]),
    ("model.layers.0.self_attn.k_proj.weight", [2, 4]),
    ("model.layers.0.mlp.gate_proj.weight", [8, 4]),
];

/// A safetensors file: u64 header length, the JSON header (padded with spaces to 8 bytes), data.
fn safetensors_file(tensors: &[(&str, &str, &[usize])]) -> Vec<u8> {
    let mut header = String::from(r#"{"__metadata__":{"format":"pt"}"#);
    let mut data = Vec::new();
    for (i, &(name, dtype, shape)) in tensors.iter().enumerate() {
        let width = if dtype == "F32" { 4 } else { 2 };
        let start = data.len();
        let count: usize = shape.iter().product();
        data.extend((0..count * width).map(|b| (b * 7 + i) as u8 & 0x3f));
        let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
        header.push_str(&format!(
            r#","{name}":{{"dtype":"{dtype}","shape":[{}],"data_offsets":[{start},{}]}}"#,
            dims.join(","),
            data.len()
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    bytes
}

fn tiny_shape(shape: &[usize; 2]) -> &[usize] {
    if shape[1] == 0 { &shape[..1] } else { &shape[..] }
}

struct Safetensors {
    seeds: Vec<Vec<u8>>,
    dir: PathBuf,
}

impl Safetensors {
    fn new(work: &Path) -> Result<Self> {
        let dir = work.join("checkpoint");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("config.json"), TINY_CONFIG)?;
        let with = |dtypes: [&'static str; 6]| -> Vec<u8> {
            let tensors: Vec<(&str, &str, &[usize])> = TINY_TENSORS
                .iter()
                .zip(dtypes)
                .map(|((name, shape), dtype)| (*name, dtype, tiny_shape(shape)))
                .collect();
            safetensors_file(&tensors)
        };
        let seeds = vec![with(["F32", "F16", "BF16", "F32", "F32", "BF16"]), with(["F32"; 6])];
        Ok(Safetensors { seeds, dir })
    }
}

impl Target for Safetensors {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        std::fs::write(self.dir.join("model.safetensors"), bytes).map_err(fail)?;
        let checkpoint = Checkpoint::open(&self.dir).map_err(fail)?;
        let mut refused = None;
        for (name, shape) in &TINY_TENSORS {
            if let Err(e) = checkpoint.tensor_f32(name, tiny_shape(shape)) {
                refused.get_or_insert(e.to_string());
            }
        }
        refused.map_or(Ok(()), Err)
    }
}

struct TokenizerJson {
    seeds: Vec<Vec<u8>>,
    path: PathBuf,
}

impl TokenizerJson {
    fn new(work: &Path) -> Result<Self> {
        let seeds = [
            "crates/vocab-map/tests/data/tiny_bytelevel.json",
            "crates/vocab-map/tests/data/tiny_sentencepiece.json",
            "crates/vocab-map/tests/data/wordpiece.json",
            "crates/models/tests/data/tokenizer.json",
            "assets/demo/drafter-byte/tokenizer.json",
        ]
        .iter()
        .map(|p| read(p))
        .collect::<Result<_>>()?;
        Ok(TokenizerJson { seeds, path: work.join("tokenizer.json") })
    }
}

impl Target for TokenizerJson {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        // The vocabulary (dictionaries, maps, affinities, shortlists) encodes without special
        // tokens; the model's tokenizer adds them.
        let vocabulary = Vocabulary::from_bytes(bytes, Path::new("fuzz/tokenizer.json")).map_err(fail)?;
        black_box(vocabulary.fingerprint());
        let encoding = vocabulary.tokenizer().encode(SAMPLE, false).map_err(fail)?;
        vocabulary.tokenizer().decode(encoding.get_ids(), false).map_err(fail)?;
        std::fs::write(&self.path, bytes).map_err(fail)?;
        let tokenizer = TextTokenizer::from_file(&self.path).map_err(fail)?;
        let ids = tokenizer.encode(SAMPLE).map_err(fail)?;
        black_box(tokenizer.decode(&ids).ok());
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The harness's own tests.

struct SelfTest {
    name: String,
    seeds: Vec<Vec<u8>>,
}

impl Target for SelfTest {
    fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    fn run(&mut self, bytes: &[u8]) -> std::result::Result<(), String> {
        if bytes == self.seeds[0].as_slice() {
            return Ok(());
        }
        match self.name.as_str() {
            "selftest-panic" => panic!("the self-test target panics on a mutant of {} bytes", bytes.len()),
            "selftest-abort" => std::process::abort(),
            "selftest-alloc" => {
                let huge: Vec<u8> = vec![1; black_box(1 << 40)];
                black_box(huge.len());
            }
            _ => loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            },
        }
        Err("unreachable".into())
    }
}
