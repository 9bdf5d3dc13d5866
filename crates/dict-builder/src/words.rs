//! Splitting running text into words and punctuation, and enumerating word n-grams in the form
//! they take inside running text.
//!
//! DictSpec (dictspec.txt §3.1) counts "words and word n-grams"; the exact segmentation is not in
//! the notes available to us, so this is a reconstruction chosen to match how BPE pre-tokenizers
//! see text:
//!
//! - a *piece* is a run of letters and digits, which may contain an apostrophe (`'`, `’`, `ʼ`)
//!   or a hyphen between two letters or digits (`п'ять`, `будь-який`), or a run of one repeated
//!   punctuation character (`,`, `...`);
//! - a piece is *spaced* when a space or tab precedes it on its line. A piece at the start of a
//!   line is not: inside running text it follows a newline, and tokenizers do not give it the
//!   leading-space form;
//! - an n-gram is `n` consecutive pieces of one line; its *surface* is the pieces joined as they
//!   appeared, with a single space before each spaced piece, including the first. That surface is
//!   what gets tokenized, so `" Київ,"` and `"Київ,"` are different entries, exactly as they are
//!   different token sequences in running text;
//! - no n-gram crosses a line break.

/// Version of the rules above, recorded in count shards and dictionaries so that counts made
/// with other rules are never mixed.
pub const SEGMENTATION_VERSION: u32 = 1;

/// A piece of a line: its byte range and whether a space or tab precedes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: usize,
    end: usize,
    spaced: bool,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric()
}

fn is_joiner(c: char) -> bool {
    matches!(c, '\'' | '’' | 'ʼ' | '-' | '‐' | '‑')
}

/// Splits one line (without its newline) into pieces, appending them to `pieces`.
fn split_pieces(line: &str, pieces: &mut Vec<Piece>) {
    pieces.clear();
    let mut chars = line.char_indices().peekable();
    let mut spaced = false;
    while let Some((start, c)) = chars.next() {
        if c.is_whitespace() {
            spaced = true;
            continue;
        }
        let mut end = start + c.len_utf8();
        if is_word_char(c) {
            loop {
                match chars.peek().copied() {
                    Some((i, next)) if is_word_char(next) => {
                        end = i + next.len_utf8();
                        chars.next();
                    }
                    Some((i, next)) if is_joiner(next) => {
                        // A joiner stays inside the word only when a word character follows it.
                        let after = line[i + next.len_utf8()..].chars().next();
                        if after.is_some_and(is_word_char) {
                            end = i + next.len_utf8();
                            chars.next();
                        } else {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        } else {
            while let Some((i, next)) = chars.peek().copied() {
                if next != c {
                    break;
                }
                end = i + next.len_utf8();
                chars.next();
            }
        }
        pieces.push(Piece { start, end, spaced });
        spaced = false;
    }
}

/// Enumerates word n-grams of orders `1..=max_order` in `text`.
///
/// Keeps its buffers between calls, so one segmenter per thread allocates almost nothing.
#[derive(Debug, Default)]
pub struct NgramSegmenter {
    pieces: Vec<Piece>,
    surface: String,
}

impl NgramSegmenter {
    /// A segmenter with empty buffers.
    pub fn new() -> Self {
        NgramSegmenter::default()
    }

    /// Calls `f(order, surface)` for every n-gram of order `1..=max_order` of every line of
    /// `text`, in text order (all orders starting at one piece before the next piece).
    pub fn for_each_ngram(&mut self, text: &str, max_order: usize, mut f: impl FnMut(usize, &str)) {
        for line in text.split('\n') {
            split_pieces(line, &mut self.pieces);
            for i in 0..self.pieces.len() {
                self.surface.clear();
                for (order, piece) in self.pieces[i..].iter().take(max_order).enumerate() {
                    if piece.spaced {
                        self.surface.push(' ');
                    }
                    self.surface.push_str(&line[piece.start..piece.end]);
                    f(order + 1, &self.surface);
                }
            }
        }
    }

    /// Number of words (pieces that contain a letter or digit) in `text`, the denominator of
    /// tokenizer fertility.
    pub fn count_words(&mut self, text: &str) -> u64 {
        let mut words = 0;
        for line in text.split('\n') {
            split_pieces(line, &mut self.pieces);
            words += self.pieces.iter().filter(|p| line[p.start..p.end].chars().any(is_word_char)).count() as u64;
        }
        words
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ngrams(text: &str, max_order: usize) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        NgramSegmenter::new().for_each_ngram(text, max_order, |order, s| out.push((order, s.to_string())));
        out
    }

    #[test]
    fn pieces_keep_apostrophes_hyphens_and_punctuation_runs() {
        let got: Vec<String> = ngrams("Він п'ять будь-який, ну... 'так'", 1).into_iter().map(|(_, s)| s).collect();
        assert_eq!(got, ["Він", " п'ять", " будь-який", ",", " ну", "...", " '", "так", "'"]);
    }

    #[test]
    fn ngrams_keep_spacing_and_stop_at_line_breaks() {
        let got = ngrams("a b,\n c", 3);
        let expected: Vec<(usize, String)> = vec![
            (1, "a".into()),
            (2, "a b".into()),
            (3, "a b,".into()),
            (1, " b".into()),
            (2, " b,".into()),
            (1, ",".into()),
            (1, " c".into()),
        ];
        assert_eq!(got, expected);
    }

    #[test]
    fn words_exclude_punctuation() {
        assert_eq!(NgramSegmenter::new().count_words("Так, ні — 42.\nde-facto"), 4);
    }
}
