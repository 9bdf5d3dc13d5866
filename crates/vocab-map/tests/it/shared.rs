//! Checks against the real tokenizers in `../shared/tokenizers`; each test returns early with a
//! message when that directory is absent (a fresh clone).

use std::path::PathBuf;

use anyspec_vocab_map::{MatchMode, VocabMap, Vocabulary};

fn shared_tokenizer(name: &str) -> Option<Vocabulary> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tokenizers").join(name).join("tokenizer.json");
    if !path.exists() {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("skipping: {} is absent", path.display());
        }
        return None;
    }
    Some(Vocabulary::from_file(&path).unwrap())
}

#[test]
fn llama31_and_qwen2_share_109566_token_strings_as_in_the_paper() {
    let (Some(llama), Some(qwen)) = (shared_tokenizer("llama3.1"), shared_tokenizer("qwen2")) else { return };
    let raw = VocabMap::build(&llama, &qwen, MatchMode::Raw);
    assert_eq!(raw.intersection(), 109_566);
    assert_eq!(llama.token_count(), 128_256);
    assert_eq!(qwen.token_count(), 151_646);
    let bytes = VocabMap::build(&llama, &qwen, MatchMode::Bytes);
    assert!(bytes.intersection() >= 109_000, "{}", bytes.intersection());
}

#[test]
fn sentencepiece_and_byte_level_spell_the_same_word_alike_in_bytes() {
    let (Some(llama2), Some(gpt2)) = (shared_tokenizer("llama2"), shared_tokenizer("gpt2")) else { return };
    let a = llama2.tokenizer().token_to_id("▁the").unwrap();
    let b = gpt2.tokenizer().token_to_id("Ġthe").unwrap();
    assert_eq!(llama2.surface(a), gpt2.surface(b));
    let raw = VocabMap::build(&gpt2, &llama2, MatchMode::Raw).intersection();
    let bytes = VocabMap::build(&gpt2, &llama2, MatchMode::Bytes).intersection();
    assert_eq!(raw, 7_263, "the string intersection computed in the notes");
    assert!(bytes > 2 * raw, "bytes {bytes}, raw {raw}");
}
