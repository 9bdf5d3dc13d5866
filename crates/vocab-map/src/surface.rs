//! Token byte surfaces: the bytes a token contributes to decoded text, whatever the tokenizer's
//! convention for spaces and bytes.
//!
//! Tokenizer families spell the same text differently: GPT-2-style byte-level BPE writes a space
//! as `Ġ` and a newline as `Ċ`, SentencePiece writes a space as `▁` and unknown bytes as
//! `<0x0A>`, WordPiece marks continuations with `##`. Comparing raw strings across families
//! therefore misses most shared tokens; comparing byte surfaces finds them.

use serde::{Deserialize, Serialize};
use tokenizers::{DecoderWrapper, ModelWrapper, PreTokenizerWrapper, Tokenizer};

use crate::TokenKind;

/// How a tokenizer spells text in its tokens, read from its decoder (and model).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SurfaceStyle {
    /// GPT-2's byte-level BPE: every byte is written as one printable character of GPT-2's
    /// byte ↔ unicode table (`Ġ` = space, `Ċ` = newline).
    ByteLevel,
    /// SentencePiece conventions (a `Metaspace` decoder, or `Replace("▁", " ")`): `replacement`
    /// stands for a space; with `byte_fallback`, tokens `<0xNN>` stand for the single byte `NN`.
    SentencePiece {
        /// The character written for a space, normally `▁` (U+2581).
        replacement: char,
        /// Whether `<0xNN>` tokens are bytes.
        byte_fallback: bool,
    },
    /// WordPiece: a token that starts with `prefix` (`##`) continues the previous word; any other
    /// token starts a new word, which the decoder separates with a space. The surface of a
    /// word-initial token therefore starts with a space, the same convention as `Ġthe` and `▁the`.
    WordPiece {
        /// The continuation prefix, normally `##`.
        prefix: String,
    },
    /// Tokens are their own text.
    Plain,
}

impl SurfaceStyle {
    /// Reads the style of a tokenizer from its decoder, falling back to its pre-tokenizer and
    /// model when it has no decoder.
    pub fn detect(tokenizer: &Tokenizer) -> SurfaceStyle {
        let mut found = Found::default();
        if let Some(decoder) = tokenizer.get_decoder() {
            found.decoder(decoder);
        }
        if let Some(pre_tokenizer) = tokenizer.get_pre_tokenizer() {
            found.pre_tokenizer(pre_tokenizer);
        }
        let model = tokenizer.get_model();
        if let ModelWrapper::BPE(bpe) = model {
            found.byte_fallback |= bpe.byte_fallback;
        }
        if found.byte_level {
            return SurfaceStyle::ByteLevel;
        }
        if let Some(replacement) = found.replacement {
            return SurfaceStyle::SentencePiece { replacement, byte_fallback: found.byte_fallback };
        }
        if let Some(prefix) = found.wordpiece_prefix {
            return SurfaceStyle::WordPiece { prefix };
        }
        if let ModelWrapper::WordPiece(wordpiece) = model {
            return SurfaceStyle::WordPiece { prefix: wordpiece.continuing_subword_prefix.clone() };
        }
        if found.byte_fallback {
            // Byte fallback without a space convention (rare): still decode `<0xNN>` as bytes.
            return SurfaceStyle::SentencePiece { replacement: ' ', byte_fallback: true };
        }
        SurfaceStyle::Plain
    }

    /// A short lowercase name for tables and JSON.
    pub fn name(&self) -> &'static str {
        match self {
            SurfaceStyle::ByteLevel => "byte_level",
            SurfaceStyle::SentencePiece { byte_fallback: true, .. } => "sentencepiece_byte_fallback",
            SurfaceStyle::SentencePiece { byte_fallback: false, .. } => "sentencepiece",
            SurfaceStyle::WordPiece { .. } => "wordpiece",
            SurfaceStyle::Plain => "plain",
        }
    }

    /// Appends the byte surface of one token to `out`; returns whether the token is a
    /// byte-fallback token (`<0xNN>`).
    ///
    /// Added and special tokens are matched against the input text before the model runs, so
    /// their surface is their content as UTF-8 whatever the style. A byte-level token with a
    /// character outside GPT-2's table (which no trained byte-level vocabulary has) keeps that
    /// character's UTF-8 bytes rather than failing: the surface is then still deterministic.
    pub(crate) fn surface_into(&self, raw: &str, kind: TokenKind, out: &mut Vec<u8>) -> bool {
        if kind != TokenKind::Normal {
            out.extend_from_slice(raw.as_bytes());
            return false;
        }
        match self {
            SurfaceStyle::ByteLevel => {
                for c in raw.chars() {
                    match byte_of_char(c) {
                        Some(b) => out.push(b),
                        None => out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes()),
                    }
                }
                false
            }
            SurfaceStyle::SentencePiece { replacement, byte_fallback } => {
                if *byte_fallback && let Some(b) = parse_byte_token(raw) {
                    out.push(b);
                    return true;
                }
                for c in raw.chars() {
                    if c == *replacement {
                        out.push(b' ');
                    } else {
                        out.extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes());
                    }
                }
                false
            }
            SurfaceStyle::WordPiece { prefix } => {
                match raw.strip_prefix(prefix.as_str()) {
                    Some(rest) if !prefix.is_empty() => out.extend_from_slice(rest.as_bytes()),
                    _ => {
                        out.push(b' ');
                        out.extend_from_slice(raw.as_bytes());
                    }
                }
                false
            }
            SurfaceStyle::Plain => {
                out.extend_from_slice(raw.as_bytes());
                false
            }
        }
    }
}

/// What the walk over decoders and pre-tokenizers found.
#[derive(Default)]
struct Found {
    byte_level: bool,
    replacement: Option<char>,
    byte_fallback: bool,
    wordpiece_prefix: Option<String>,
}

impl Found {
    fn decoder(&mut self, decoder: &DecoderWrapper) {
        match decoder {
            DecoderWrapper::ByteLevel(_) => self.byte_level = true,
            DecoderWrapper::Metaspace(metaspace) => {
                self.replacement.get_or_insert(metaspace.get_replacement());
            }
            DecoderWrapper::WordPiece(wordpiece) => {
                self.wordpiece_prefix.get_or_insert_with(|| wordpiece.prefix.clone());
            }
            DecoderWrapper::ByteFallback(_) => self.byte_fallback = true,
            DecoderWrapper::Replace(replace) => {
                // `Replace` keeps its pattern private; its serialized form is the stable way in.
                if let Ok(value) = serde_json::to_value(replace)
                    && value["content"] == " "
                    && let Some(pattern) = value["pattern"]["String"].as_str()
                    && let Some(c) = single_char(pattern)
                {
                    self.replacement.get_or_insert(c);
                }
            }
            DecoderWrapper::Sequence(sequence) => {
                for inner in sequence.get_decoders() {
                    self.decoder(inner);
                }
            }
            _ => {}
        }
    }

    fn pre_tokenizer(&mut self, pre_tokenizer: &PreTokenizerWrapper) {
        match pre_tokenizer {
            PreTokenizerWrapper::ByteLevel(_) => self.byte_level = true,
            PreTokenizerWrapper::Metaspace(metaspace) => {
                self.replacement.get_or_insert(metaspace.get_replacement());
            }
            PreTokenizerWrapper::Sequence(sequence) => {
                if let Ok(value) = serde_json::to_value(sequence)
                    && let Some(inner) = value["pretokenizers"].as_array()
                {
                    for item in inner {
                        match item["type"].as_str() {
                            Some("ByteLevel") => self.byte_level = true,
                            Some("Metaspace") => {
                                if let Some(c) = item["replacement"].as_str().and_then(single_char) {
                                    self.replacement.get_or_insert(c);
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

/// Parses a byte-fallback token `<0xNN>` (two hexadecimal digits, as SentencePiece writes them).
pub(crate) fn parse_byte_token(raw: &str) -> Option<u8> {
    let hex = raw.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// GPT-2's table: byte `b` is written as the character `char_of_byte(b)`. Printable bytes
/// (`!`..=`~`, `¡`..=`¬`, `®`..=`ÿ`) stand for themselves; the other 68 take the code points
/// 256, 257, … in byte order.
pub fn char_of_byte(byte: u8) -> char {
    char::from_u32(BYTE_TO_CODE[byte as usize]).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The inverse of [`char_of_byte`]: the byte a byte-level character stands for, if any.
pub fn byte_of_char(c: char) -> Option<u8> {
    let slot = *CODE_TO_BYTE.get(u32::from(c) as usize)?;
    u8::try_from(slot).ok()
}

const fn is_printable_byte(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The code points GPT-2 writes for the bytes 0..=255.
const BYTE_TO_CODE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut shifted = 0;
    let mut b = 0;
    while b < 256 {
        if is_printable_byte(b as u8) {
            table[b] = b as u32;
        } else {
            table[b] = 256 + shifted;
            shifted += 1;
        }
        b += 1;
    }
    table
};

/// Code point → byte for the code points of [`BYTE_TO_CODE`] (all below 256 + 68); -1 elsewhere.
const CODE_TO_BYTE: [i16; 324] = {
    let mut table = [-1i16; 324];
    let mut b = 0;
    while b < 256 {
        table[BYTE_TO_CODE[b] as usize] = b as i16;
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_table_spells_space_and_newline_as_g_and_c_with_dots() {
        assert_eq!(char_of_byte(b' '), 'Ġ');
        assert_eq!(char_of_byte(b'\n'), 'Ċ');
        assert_eq!(char_of_byte(b'\t'), 'ĉ');
        assert_eq!(char_of_byte(b'a'), 'a');
        assert_eq!(byte_of_char('Ġ'), Some(b' '));
        assert_eq!(byte_of_char('Ċ'), Some(b'\n'));
        assert_eq!(byte_of_char(' '), None, "a raw space is not in the table");
        assert_eq!(byte_of_char('€'), None);
    }

    #[test]
    fn gpt2_table_is_a_bijection_on_bytes() {
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = char_of_byte(b);
            assert!(seen.insert(c), "{c:?} used twice");
            assert_eq!(byte_of_char(c), Some(b));
        }
        assert_eq!(char_of_byte(0xFF), 'ÿ');
        assert_eq!(char_of_byte(0xAD), 'Ń', "the soft hyphen is the last remapped byte");
    }

    #[test]
    fn byte_tokens_parse_only_in_the_exact_form() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(b'\n'));
        assert_eq!(parse_byte_token("<0xFF>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x0A"), None);
        assert_eq!(parse_byte_token("<0xA>"), None);
        assert_eq!(parse_byte_token("<0xZZ>"), None);
    }

    fn surface(style: &SurfaceStyle, raw: &str, kind: TokenKind) -> Vec<u8> {
        let mut out = Vec::new();
        style.surface_into(raw, kind, &mut out);
        out
    }

    #[test]
    fn each_style_decodes_its_spelling_of_a_space() {
        let sp = SurfaceStyle::SentencePiece { replacement: '▁', byte_fallback: true };
        let wp = SurfaceStyle::WordPiece { prefix: "##".into() };
        assert_eq!(surface(&SurfaceStyle::ByteLevel, "Ġthe", TokenKind::Normal), b" the");
        assert_eq!(surface(&SurfaceStyle::ByteLevel, "ĊĊ", TokenKind::Normal), b"\n\n");
        assert_eq!(surface(&SurfaceStyle::ByteLevel, "Ã©", TokenKind::Normal), "é".as_bytes());
        assert_eq!(surface(&sp, "▁the", TokenKind::Normal), b" the");
        assert_eq!(surface(&sp, "<0x0A>", TokenKind::Normal), b"\n");
        assert_eq!(surface(&sp, "<0x0A>", TokenKind::Special), b"<0x0A>");
        assert_eq!(surface(&wp, "##ing", TokenKind::Normal), b"ing");
        assert_eq!(surface(&wp, "the", TokenKind::Normal), b" the");
        assert_eq!(surface(&SurfaceStyle::ByteLevel, "<|endoftext|>", TokenKind::Special), b"<|endoftext|>");
    }
}
