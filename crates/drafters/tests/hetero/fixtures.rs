//! Loading the fixture pair, id maps, a small affinity matrix and a closed-form drafter model.

use std::path::{Path, PathBuf};

use anyspec_core::projection::{AffinityMatrix, IdMap};
use anyspec_drafters::Result;
use anyspec_drafters::hetero::DrafterModel;
use anyspec_models::{Checkpoint, DeviceChoice, Llama, TextTokenizer};
use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr_free::gaussian;

/// The target: the Mistral conformance fixture of anyspec-models (320-token byte-level BPE).
pub(crate) fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tests/data/mistral-window-f16")
}

/// The drafter: 322 tokens, other ids, three of the target's merges missing and six of its own.
pub(crate) fn drafter_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hetero-drafter")
}

pub(crate) fn load(dir: &Path) -> Llama {
    Checkpoint::open(dir).unwrap().load_model(&DeviceChoice::Cpu.device().unwrap()).unwrap()
}

pub(crate) fn tokenizer(dir: &Path) -> TextTokenizer {
    TextTokenizer::from_file(&dir.join("tokenizer.json")).unwrap()
}

pub(crate) fn vocab_map(mode: MatchMode) -> VocabMap {
    let target = Vocabulary::from_file(&target_dir().join("tokenizer.json")).unwrap();
    let drafter = Vocabulary::from_file(&drafter_dir().join("tokenizer.json")).unwrap();
    VocabMap::build(&target, &drafter, mode)
}

pub(crate) fn id_map() -> IdMap {
    vocab_map(MatchMode::Bytes).id_map().unwrap()
}

/// The prompt, in target ids.
pub(crate) fn prompt() -> Vec<u32> {
    tokenizer(&target_dir()).encode("The quick brown fox jumps over the lazy").unwrap()
}

/// A row-stochastic affinity matrix over the 320 target ids: each token keeps 70% of its mass
/// and passes 30% to one of the three target-only tokens (ids 317..320, merges the drafter lacks),
/// so RDK drafts tokens the drafter cannot produce. Only its shape matters for losslessness.
pub(crate) fn affinity() -> AffinityMatrix {
    let n = 320usize;
    let (mut offsets, mut columns, mut values) = (vec![0usize], Vec::new(), Vec::new());
    for i in 0..n {
        let j = if i >= 317 { (i + 17) % n } else { 317 + i % 3 };
        columns.extend([i as u32, j as u32]);
        values.extend([0.7f32, 0.3]);
        offsets.push(columns.len());
    }
    AffinityMatrix::from_csr(n, offsets, columns, values).unwrap()
}

/// A drafter model in closed form: the next-token logits depend on the last drafter id only
/// (a Markov chain over the drafter vocabulary). Lets the statistical tests draw tens of
/// thousands of sequences through the real bridge code (tokenizers, context conversion,
/// projections, sampling) in seconds.
#[derive(Clone, Debug)]
pub(crate) struct MarkovDrafterModel {
    rows: Vec<Vec<f32>>,
    kept: Option<Vec<u32>>,
}

impl MarkovDrafterModel {
    /// Random logits (seeded) on `support` (drafter ids), −∞ elsewhere.
    pub(crate) fn new(vocab: usize, support: &[u32], seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let rows = (0..vocab)
            .map(|_| {
                let mut row = vec![f32::NEG_INFINITY; vocab];
                for &d in support {
                    row[d as usize] = (1.5 * gaussian(&mut rng)) as f32;
                }
                row
            })
            .collect();
        MarkovDrafterModel { rows, kept: None }
    }
}

impl DrafterModel for MarkovDrafterModel {
    fn vocab_size(&self) -> usize {
        self.rows.len()
    }

    fn max_sequence_len(&self) -> usize {
        1 << 20
    }

    fn keep_rows(&mut self, ids: Option<&[u32]>) -> Result<()> {
        self.kept = ids.map(<[u32]>::to_vec);
        Ok(())
    }

    fn next_logits(&mut self, sequence: &[u32]) -> Result<Vec<f32>> {
        let row = &self.rows[*sequence.last().unwrap() as usize];
        Ok(match &self.kept {
            Some(ids) => ids.iter().map(|&d| row[d as usize]).collect(),
            None => row.clone(),
        })
    }
}

/// Standard normal draws without another dependency (Box–Muller).
mod rand_distr_free {
    use rand::Rng;

    pub(crate) fn gaussian<R: Rng + ?Sized>(rng: &mut R) -> f64 {
        let u1: f64 = rng.random::<f64>().max(1e-300);
        let u2: f64 = rng.random();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}
