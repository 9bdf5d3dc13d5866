use anyspec_vocab_map::{SurfaceStyle, TokenKind, Vocabulary};

use crate::fixture;

fn id(vocab: &Vocabulary, token: &str) -> u32 {
    vocab.tokenizer().token_to_id(token).unwrap_or_else(|| panic!("{token:?} is not in {}", vocab.name()))
}

/// The concatenated surfaces of the tokens of `text`.
fn surfaces_of(vocab: &Vocabulary, text: &str) -> Vec<u8> {
    let encoding = vocab.tokenizer().encode(text, false).unwrap();
    encoding.get_ids().iter().flat_map(|&id| vocab.surface(id).unwrap().to_vec()).collect()
}

const TEXT: &str = "What light through yonder window breaks?\nIt is the east, and Juliet is the sun. 日本 ünïcödé";

#[test]
fn styles_are_detected_from_decoders() {
    assert_eq!(fixture("bytelevel.json").style(), &SurfaceStyle::ByteLevel);
    assert_eq!(
        fixture("sentencepiece.json").style(),
        &SurfaceStyle::SentencePiece { replacement: '▁', byte_fallback: true }
    );
    assert_eq!(
        fixture("metaspace.json").style(),
        &SurfaceStyle::SentencePiece { replacement: '▁', byte_fallback: true }
    );
    assert_eq!(fixture("wordpiece.json").style(), &SurfaceStyle::WordPiece { prefix: "##".into() });
}

#[test]
fn byte_level_surfaces_concatenate_to_the_text() {
    let vocab = fixture("bytelevel.json");
    assert_eq!(surfaces_of(&vocab, TEXT), TEXT.as_bytes());
    assert_eq!(vocab.surface(id(&vocab, "Ġthe")).unwrap(), b" the");
    assert_eq!(vocab.surface(id(&vocab, "Ċ")).unwrap(), b"\n");
}

#[test]
fn sentencepiece_surfaces_concatenate_to_the_text_after_the_prepended_space() {
    // Both SentencePiece fixtures prepend `▁` to the text, and the non-ASCII characters they never
    // saw in training go through byte fallback, so the surfaces must turn `<0xE6>` … back into UTF-8.
    for name in ["sentencepiece.json", "metaspace.json"] {
        let vocab = fixture(name);
        let encoding = vocab.tokenizer().encode(TEXT, false).unwrap();
        assert!(
            encoding.get_ids().iter().any(|&id| vocab.is_byte_fallback(id)),
            "{name}: the text should need byte fallback"
        );
        assert_eq!(surfaces_of(&vocab, TEXT), format!(" {TEXT}").as_bytes(), "{name}");
        assert_eq!(vocab.surface(id(&vocab, "▁the")).unwrap(), b" the", "{name}");
        assert_eq!(vocab.surface(id(&vocab, "<0x0A>")).unwrap(), b"\n", "{name}");
        assert_eq!(vocab.surface(id(&vocab, "<0xE6>")).unwrap(), [0xE6], "{name}");
        assert!(!vocab.is_byte_fallback(id(&vocab, "▁the")));
    }
}

#[test]
fn wordpiece_continuations_lose_their_prefix_and_word_starts_gain_a_space() {
    let vocab = fixture("wordpiece.json");
    let encoding = vocab.tokenizer().encode("Juliet would wander", false).unwrap();
    assert!(encoding.get_tokens().iter().any(|t| t.starts_with("##")), "{:?}", encoding.get_tokens());
    assert_eq!(surfaces_of(&vocab, "Juliet would wander"), b" Juliet would wander");
    assert_eq!(vocab.surface(id(&vocab, "would")).unwrap(), b" would");
}

#[test]
fn special_tokens_keep_their_content_as_surface() {
    let vocab = fixture("bytelevel.json");
    let eot = id(&vocab, "<|endoftext|>");
    assert_eq!(vocab.token(eot).unwrap().kind, TokenKind::Special);
    assert_eq!(vocab.surface(eot).unwrap(), b"<|endoftext|>");
    let sp = fixture("sentencepiece.json");
    assert_eq!(sp.token(0).unwrap().kind, TokenKind::Special);
    assert_eq!(sp.token(3).unwrap().raw, "<0x00>");
    assert_eq!(sp.token(3).unwrap().kind, TokenKind::Normal);
}

#[test]
fn sizes_count_every_id() {
    assert_eq!(fixture("bytelevel.json").len(), 700);
    assert_eq!(fixture("tiny_sentencepiece.json").len(), 11);
    assert_eq!(fixture("tiny_sentencepiece.json").token_count(), 11);
    assert!(fixture("tiny_sentencepiece.json").surface(11).is_none());
}

mod properties {
    use proptest::prelude::*;

    use super::surfaces_of;
    use crate::fixture;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        /// Byte-level BPE is lossless: the surfaces of any text's tokens are the text.
        #[test]
        fn byte_level_surfaces_spell_any_text(text in "\\PC{1,40}") {
            let vocab = fixture("bytelevel.json");
            prop_assert_eq!(surfaces_of(&vocab, &text), text.as_bytes());
        }

        /// SentencePiece with byte fallback spells any text after the `▁` it prepends (texts
        /// without a literal `▁`, which the normalizer cannot tell from a space).
        #[test]
        fn sentencepiece_surfaces_spell_any_text(text in "[^▁]{1,40}") {
            let vocab = fixture("sentencepiece.json");
            prop_assert_eq!(surfaces_of(&vocab, &text), format!(" {text}").into_bytes());
        }
    }
}
