//! `cargo xtask fixtures dict`: trains the tiny byte-level BPE tokenizer that the dictionary
//! tests use, on the small corpus committed beside it, so that tests need no downloaded
//! tokenizer and the fixture can be regenerated from source.

use std::path::Path;

use anyhow::Context;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

/// Vocabulary size: the 256 byte symbols plus enough merges for whole frequent words.
const VOCAB_SIZE: usize = 640;

pub(crate) fn run() -> anyhow::Result<()> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/dict-builder/tests/data");
    let corpus = data.join("corpus.txt");
    let out = data.join("tokenizer.json");
    // GPT-2's pipeline: byte-level pre-tokenizer without an added prefix space, byte-level decoder.
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevel::new(false, true, true)));
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(VOCAB_SIZE)
        .min_frequency(2)
        .show_progress(false)
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .special_tokens(vec![AddedToken::from("<|endoftext|>", true)])
        .build()
        .into();
    tokenizer
        .train_from_files(&mut trainer, vec![corpus.display().to_string()])
        .map_err(|e| anyhow::anyhow!("training the fixture tokenizer on {} failed: {e}", corpus.display()))?;
    tokenizer
        .save(&out, false)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot write {}", out.display()))?;
    #[allow(clippy::print_stdout)]
    {
        println!("wrote {} ({} tokens)", out.display(), tokenizer.get_vocab_size(true));
    }
    Ok(())
}
