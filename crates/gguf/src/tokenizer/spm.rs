//! SentencePiece (`tokenizer.ggml.model = "llama"`) vocabularies as a BPE tokenizer.
//!
//! The file stores the pieces and their scores but no merges. Like transformers' GGUF converter
//! (`GGUFLlamaConverter` in `integrations/ggml.py`, which builds Llama's fast tokenizer), we
//! derive merges from the vocabulary: every split of a piece into two pieces of the vocabulary
//! is a merge, ranked by the score of the merged piece, highest first. That reproduces
//! llama.cpp's SentencePiece tokenizer (`llm_tokenizer_spm`), which repeatedly merges the
//! adjacent pair whose merged piece scores highest. Spaces become `▁` (U+2581), with one
//! prepended when `tokenizer.ggml.add_space_prefix` is set (the default), and bytes missing from
//! the vocabulary fall back to the `<0xAB>` byte pieces when the vocabulary has them.

use std::cmp::Ordering;

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::{DecoderWrapper, NormalizerWrapper, Tokenizer};

use super::{Vocab, build_error, token_type};
use crate::error::Result;

/// SentencePiece's word-boundary marker.
const SPACE: &str = "\u{2581}";

pub(super) fn spm_tokenizer(
    vocab: &Vocab<'_>,
    scores: Option<&[f32]>,
    unk: Option<u32>,
    add_space_prefix: bool,
) -> Result<Tokenizer> {
    if let Some(scores) = scores
        && scores.len() != vocab.tokens.len()
    {
        return Err(vocab.error(format!(
            "tokenizer.ggml.scores has {} entries for {} tokens",
            scores.len(),
            vocab.tokens.len()
        )));
    }
    let ids = vocab.ids();
    // Without scores, earlier pieces rank higher (SentencePiece sorts pieces by score).
    let score = |id: u32| -> f32 {
        match scores {
            Some(s) => s[id as usize],
            None => -(id as f32),
        }
    };
    let mut merges: Vec<(f32, u32, u32, &str, &str)> = Vec::new();
    for (id, piece) in vocab.tokens.iter().enumerate() {
        // Only ordinary pieces are built by merging; control, byte and unused pieces are not.
        if !matches!(vocab.types[id], token_type::NORMAL | token_type::USER_DEFINED) {
            continue;
        }
        for (at, _) in piece.char_indices().skip(1) {
            let (left, right) = piece.split_at(at);
            if let (Some(&l), Some(&r)) = (ids.get(left), ids.get(right)) {
                merges.push((score(id as u32), l, r, left, right));
            }
        }
    }
    merges.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then((a.1, a.2).cmp(&(b.1, b.2))));
    let pairs = merges.into_iter().map(|(_, _, _, l, r)| (l.to_string(), r.to_string())).collect();
    let byte_fallback = ids.contains_key("<0x00>") && ids.contains_key("<0xFF>");
    let mut builder = BPE::builder()
        .vocab_and_merges(ids.into_iter().collect::<tokenizers::models::bpe::Vocab>(), pairs)
        .byte_fallback(byte_fallback)
        .fuse_unk(true);
    if let Some(unk) = unk {
        builder = builder.unk_token(vocab.tokens[unk as usize].to_string());
    }
    let model = builder.build().map_err(|e| build_error(&vocab.file, "the SentencePiece model", e))?;
    let mut tokenizer = Tokenizer::new(model);
    let replace = Replace::new(" ", SPACE).map_err(|e| build_error(&vocab.file, "the normalizer", e))?;
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if add_space_prefix {
        normalizers.push(Prepend::new(SPACE.to_string()).into());
    }
    normalizers.push(replace.into());
    tokenizer.with_normalizer(Some(NormalizerSequence::new(normalizers)));
    let unspace = tokenizers::decoders::DecoderWrapper::Replace(
        Replace::new(SPACE, " ").map_err(|e| build_error(&vocab.file, "the decoder", e))?,
    );
    let decoders: Vec<DecoderWrapper> = vec![
        unspace,
        ByteFallback::new().into(),
        Fuse::new().into(),
        Strip::new(' ', usize::from(add_space_prefix), 0).into(),
    ];
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(tokenizer)
}
