//! Integration tests of anyspec-train on tiny sizes: tokenizers round-trip, a few steps reduce
//! the loss, and a saved checkpoint reloads through anyspec-models to the same logits.

mod checkpoint;
mod router;
mod tokenizers;
mod training;

use anyspec_train::ModelSpec;

/// A paragraph-split public-domain text (from *Pride and Prejudice*, Project Gutenberg).
pub(crate) fn fixture_texts() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/austen.txt"))
        .expect("the committed fixture is readable");
    text.split("\n\n").filter(|p| !p.trim().is_empty()).map(str::to_owned).collect()
}

pub(crate) fn tiny_spec(vocab_size: usize) -> ModelSpec {
    ModelSpec {
        vocab_size,
        hidden_size: 32,
        intermediate_size: 64,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        max_position_embeddings: 128,
        rope_theta: 10_000.0,
        rms_norm_eps: 1e-5,
        eos_token_id: 0,
    }
}
