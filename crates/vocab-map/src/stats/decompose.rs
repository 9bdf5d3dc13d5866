//! Counting the ways a token can be spelled with another vocabulary's tokens (the paper's
//! Appendix D and Table 8).
//!
//! String-level rejection sampling (SLRS, hetero-vocab-sd Algorithm 3) needs ψ(t), the
//! probability that the drafter generates the string of target token `t`: a sum over every
//! sequence of drafter tokens whose concatenation is that string. The paper counted these
//! sequences by enumeration and gave up on the longest 1,646 Qwen2 tokens. The count obeys a
//! recurrence over suffixes, so it is computed exactly here in `O(L²)` per token of `L` bytes:
//!
//! ```text
//! N(L) = 1,   N(i) = Σ_{j > i : s[i..j] is a drafter surface} m(s[i..j]) · N(j),   count = N(0)
//! ```
//!
//! where `m(w)` is the number of drafter tokens whose surface is `w` (usually 1; each is a
//! different token sequence). The prefixes `s[i..j]` that are drafter surfaces are found by
//! walking a byte trie of the drafter's surfaces from position `i`. Counts grow like `2^(L−1)`,
//! past `u64` for tokens longer than 64 bytes: they are kept in `u128`, and in a big integer for
//! the rare token that overflows even that.

use anyspec_core::{Progress, ProgressUnit};
use num_bigint::BigUint;
use num_traits::{ToPrimitive, Zero};
use serde::{Deserialize, Serialize};

use super::Describe;
use crate::{TokenKind, Vocabulary};

/// A byte trie of a drafter's token surfaces (special tokens and empty surfaces left out).
#[derive(Clone, Debug)]
pub struct DrafterTrie {
    /// Node `n`'s outgoing edges are `edges[first_edge[n] .. first_edge[n + 1]]`, sorted by byte.
    first_edge: Vec<u32>,
    edge_byte: Vec<u8>,
    edge_child: Vec<u32>,
    /// How many drafter tokens end at each node.
    multiplicity: Vec<u32>,
    tokens: usize,
}

const ROOT: u32 = 0;

impl DrafterTrie {
    /// Builds the trie of `drafter`'s non-special surfaces; with `include`, only of the ids `i`
    /// with `include[i]` (see [`shortest_tokens`]).
    pub fn build(drafter: &Vocabulary, include: Option<&[bool]>) -> DrafterTrie {
        let mut surfaces: Vec<&[u8]> = drafter
            .tokens()
            .filter(|(id, token)| {
                token.kind != TokenKind::Special && include.is_none_or(|keep| keep.get(*id as usize) == Some(&true))
            })
            .filter_map(|(id, _)| drafter.surface(id))
            .filter(|s| !s.is_empty())
            .collect();
        let tokens = surfaces.len();
        // Inserting in sorted order appends every node's children in byte order, which is what
        // the binary search in `child` relies on.
        surfaces.sort_unstable();
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut multiplicity = vec![0u32];
        for surface in surfaces {
            let mut node = ROOT as usize;
            for &byte in surface {
                node = match children[node].last() {
                    Some(&(last, child)) if last == byte => child as usize,
                    _ => {
                        let child = children.len();
                        children[node].push((byte, child as u32));
                        children.push(Vec::new());
                        multiplicity.push(0);
                        child
                    }
                };
            }
            multiplicity[node] += 1;
        }
        let mut first_edge = Vec::with_capacity(children.len() + 1);
        let mut edge_byte = Vec::new();
        let mut edge_child = Vec::new();
        for edges in &children {
            first_edge.push(edge_byte.len() as u32);
            for &(byte, child) in edges {
                edge_byte.push(byte);
                edge_child.push(child);
            }
        }
        first_edge.push(edge_byte.len() as u32);
        DrafterTrie { first_edge, edge_byte, edge_child, multiplicity, tokens }
    }

    /// The number of drafter tokens in the trie.
    pub fn token_count(&self) -> usize {
        self.tokens
    }

    /// The number of trie nodes (root included).
    pub fn node_count(&self) -> usize {
        self.multiplicity.len()
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let (start, end) = (self.first_edge[node as usize] as usize, self.first_edge[node as usize + 1] as usize);
        let at = self.edge_byte[start..end].binary_search(&byte).ok()?;
        Some(self.edge_child[start + at])
    }

    /// Counts the drafter-token sequences that spell `surface`, with the fewest and the most
    /// tokens such a sequence has.
    pub fn decompose(&self, surface: &[u8]) -> TokenDecomposition {
        let mut scratch = Scratch::default();
        self.decompose_with(surface, &mut scratch)
    }

    fn decompose_with(&self, surface: &[u8], scratch: &mut Scratch) -> TokenDecomposition {
        match self.run::<u128>(surface, &mut scratch.small, &mut scratch.lengths) {
            Some(found) => found,
            None => {
                let mut big = Vec::new();
                self.run::<BigUint>(surface, &mut big, &mut scratch.lengths).unwrap_or(TokenDecomposition {
                    count: Count::Small(0),
                    min_tokens: 0,
                    max_tokens: 0,
                })
            }
        }
    }

    /// The suffix recurrence; `None` when a `u128` count overflows.
    fn run<C: Counter>(
        &self,
        s: &[u8],
        counts: &mut Vec<C>,
        lengths: &mut Vec<(u32, u32)>,
    ) -> Option<TokenDecomposition> {
        let len = s.len();
        counts.clear();
        counts.resize(len + 1, C::zero());
        counts[len] = C::one();
        lengths.clear();
        lengths.resize(len + 1, (u32::MAX, 0));
        lengths[len] = (0, 0);
        for i in (0..len).rev() {
            let mut node = ROOT;
            let mut total = C::zero();
            let (mut fewest, mut most) = (u32::MAX, 0);
            for j in i..len {
                let Some(next) = self.child(node, s[j]) else { break };
                node = next;
                let m = self.multiplicity[node as usize];
                if m == 0 || counts[j + 1].is_zero() {
                    continue;
                }
                if !total.add_product(&counts[j + 1], m) {
                    return None;
                }
                fewest = fewest.min(lengths[j + 1].0 + 1);
                most = most.max(lengths[j + 1].1 + 1);
            }
            counts[i] = total;
            lengths[i] = (fewest, most);
        }
        let (fewest, most) = lengths[0];
        let count = counts[0].clone().into_count();
        Some(if count.is_zero() {
            TokenDecomposition { count, min_tokens: 0, max_tokens: 0 }
        } else {
            TokenDecomposition { count, min_tokens: fewest, max_tokens: most }
        })
    }
}

#[derive(Default)]
struct Scratch {
    small: Vec<u128>,
    lengths: Vec<(u32, u32)>,
}

/// The arithmetic the recurrence needs, for `u128` (checked) and big integers.
trait Counter: Clone {
    fn zero() -> Self;
    fn one() -> Self;
    fn is_zero(&self) -> bool;
    /// `self += other · m`; false on overflow.
    fn add_product(&mut self, other: &Self, m: u32) -> bool;
    fn into_count(self) -> Count;
}

impl Counter for u128 {
    fn zero() -> Self {
        0
    }
    fn one() -> Self {
        1
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
    fn add_product(&mut self, other: &Self, m: u32) -> bool {
        match other.checked_mul(u128::from(m)).and_then(|p| self.checked_add(p)) {
            Some(sum) => {
                *self = sum;
                true
            }
            None => false,
        }
    }
    fn into_count(self) -> Count {
        Count::Small(self)
    }
}

impl Counter for BigUint {
    fn zero() -> Self {
        <BigUint as Zero>::zero()
    }
    fn one() -> Self {
        BigUint::from(1u8)
    }
    fn is_zero(&self) -> bool {
        Zero::is_zero(self)
    }
    fn add_product(&mut self, other: &Self, m: u32) -> bool {
        *self += other * m;
        true
    }
    fn into_count(self) -> Count {
        match self.to_u128() {
            Some(small) => Count::Small(small),
            None => Count::Big(self),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Count {
    Small(u128),
    Big(BigUint),
}

impl Count {
    fn is_zero(&self) -> bool {
        matches!(self, Count::Small(0))
    }
}

/// The decompositions of one target token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenDecomposition {
    count: Count,
    /// The fewest drafter tokens that spell the token (0 when it cannot be spelled).
    pub min_tokens: u32,
    /// The most drafter tokens that spell the token (0 when it cannot be spelled).
    pub max_tokens: u32,
}

impl TokenDecomposition {
    /// The exact count, when it fits in a `u128`.
    pub fn count(&self) -> Option<u128> {
        match &self.count {
            Count::Small(n) => Some(*n),
            Count::Big(_) => None,
        }
    }

    /// The exact count as a big integer.
    pub fn count_big(&self) -> BigUint {
        match &self.count {
            Count::Small(n) => BigUint::from(*n),
            Count::Big(n) => n.clone(),
        }
    }

    /// The count as a float, for means and spreads.
    pub fn count_f64(&self) -> f64 {
        match &self.count {
            Count::Small(n) => *n as f64,
            Count::Big(n) => n.to_f64().unwrap_or(f64::INFINITY),
        }
    }

    /// Whether no sequence of drafter tokens spells the token.
    pub fn is_undecomposable(&self) -> bool {
        self.count.is_zero()
    }
}

/// The decompositions of every (non-special) target token into drafter tokens.
#[derive(Clone, Debug)]
pub struct Decompositions {
    /// Indexed by target id; `None` for special tokens, empty surfaces and unused ids.
    per_token: Vec<Option<TokenDecomposition>>,
}

/// A summary of [`Decompositions`] over a set of target tokens, in the shape of Table 8.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecompositionSummary {
    /// Target tokens summarized.
    pub tokens: usize,
    /// Of those, tokens no drafter-token sequence spells.
    pub undecomposable: usize,
    /// The distribution of the counts of the decomposable tokens (as floats).
    pub count: Option<Describe>,
    /// The largest count, exact, in decimal.
    pub max_count: String,
    /// The target token with the largest count.
    pub max_count_token: Option<u32>,
    /// `n_max`: the most drafter tokens any decomposition of any summarized token has. SLRS
    /// needs at most this many drafter tokens to fix the first target token (reconstruction:
    /// the paper's exact definition of its constant is not available).
    pub n_max: u32,
    /// The distribution of the fewest drafter tokens per decomposable target token.
    pub min_tokens: Option<Describe>,
}

impl Decompositions {
    /// The decomposition of target token `id`, if it was counted.
    pub fn get(&self, id: u32) -> Option<&TokenDecomposition> {
        self.per_token.get(id as usize).and_then(Option::as_ref)
    }

    /// Summarizes the counted tokens for which `keep(id)` holds.
    pub fn summary(&self, keep: impl Fn(u32) -> bool) -> DecompositionSummary {
        let mut counts = Vec::new();
        let mut fewest = Vec::new();
        let mut tokens = 0;
        let mut undecomposable = 0;
        let mut n_max = 0;
        let mut max: Option<(u32, &TokenDecomposition)> = None;
        for (id, found) in self.per_token.iter().enumerate() {
            let Some(found) = found else { continue };
            if !keep(id as u32) {
                continue;
            }
            tokens += 1;
            if found.is_undecomposable() {
                undecomposable += 1;
                continue;
            }
            counts.push(found.count_f64());
            fewest.push(f64::from(found.min_tokens));
            n_max = n_max.max(found.max_tokens);
            if max.is_none_or(|(_, best)| found.count_big() > best.count_big()) {
                max = Some((id as u32, found));
            }
        }
        DecompositionSummary {
            tokens,
            undecomposable,
            count: Describe::of(&counts),
            max_count: max.map_or_else(|| "0".to_string(), |(_, d)| d.count_big().to_string()),
            max_count_token: max.map(|(id, _)| id),
            n_max,
            min_tokens: Describe::of(&fewest),
        }
    }
}

/// Counts, for every non-special target token, the drafter-token sequences that spell its byte
/// surface.
pub fn count_decompositions(target: &Vocabulary, trie: &DrafterTrie, progress: &dyn Progress) -> Decompositions {
    progress.start("counting decompositions", Some(target.len() as u64), ProgressUnit::Items);
    let mut scratch = Scratch::default();
    let mut per_token = vec![None; target.len()];
    for (id, token) in target.tokens() {
        if token.kind == TokenKind::Special {
            continue;
        }
        let Some(surface) = target.surface(id).filter(|s| !s.is_empty()) else { continue };
        per_token[id as usize] = Some(trie.decompose_with(surface, &mut scratch));
        if id % 4096 == 0 {
            progress.advance(4096);
        }
    }
    progress.finish();
    Decompositions { per_token }
}

/// Marks the `n` non-special tokens of `vocab` with the shortest surfaces (ties broken by id),
/// as `include` for [`DrafterTrie::build`]: "Qwen2 against its own 150,000 shortest tokens".
pub fn shortest_tokens(vocab: &Vocabulary, n: usize) -> Vec<bool> {
    let mut ids: Vec<(usize, u32)> = vocab
        .tokens()
        .filter(|(_, t)| t.kind != TokenKind::Special)
        .map(|(id, _)| (vocab.surface(id).map_or(0, <[u8]>::len), id))
        .collect();
    ids.sort_unstable();
    let mut keep = vec![false; vocab.len()];
    for &(_, id) in ids.iter().take(n) {
        keep[id as usize] = true;
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie_of(surfaces: &[&str]) -> DrafterTrie {
        let mut json = String::from(
            r#"{"version":"1.0","added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,"model":{"type":"WordLevel","unk_token":"<unk>","vocab":{"<unk>":0"#,
        );
        for (i, s) in surfaces.iter().enumerate() {
            json.push_str(&format!(",{}:{}", serde_json::to_string(s).unwrap(), i + 1));
        }
        json.push_str("}}}");
        let tokenizer: tokenizers::Tokenizer = json.parse().unwrap();
        let vocab = Vocabulary::from_tokenizer(tokenizer, "test").unwrap();
        let mut include = vec![true; vocab.len()];
        include[0] = false;
        DrafterTrie::build(&vocab, Some(&include))
    }

    #[test]
    fn the_slide_example_has_four_spellings() {
        // ψ('hey') = q('hey') + q('he','y') + q('h','ey') + q('h','e','y').
        let trie = trie_of(&["h", "e", "y", "he", "ey", "hey"]);
        let found = trie.decompose(b"hey");
        assert_eq!(found.count(), Some(4));
        assert_eq!((found.min_tokens, found.max_tokens), (1, 3));
        assert_eq!(trie.decompose(b"hex").count(), Some(0));
        assert!(trie.decompose(b"hex").is_undecomposable());
        assert_eq!(trie.decompose(b"").count(), Some(1), "the empty sequence spells the empty string");
    }

    #[test]
    fn all_runs_of_one_byte_give_compositions_of_the_length() {
        // With tokens "a", "aa", …, "a"×k, a run of n a's has 2^(n−1) spellings when k ≥ n.
        let runs: Vec<String> = (1..=20).map(|k| "a".repeat(k)).collect();
        let refs: Vec<&str> = runs.iter().map(String::as_str).collect();
        let trie = trie_of(&refs);
        for n in 1..=20 {
            assert_eq!(trie.decompose("a".repeat(n).as_bytes()).count(), Some(1u128 << (n - 1)), "n = {n}");
        }
        // With only "a" and "aa", the counts are Fibonacci numbers.
        let trie = trie_of(&["a", "aa"]);
        assert_eq!(trie.decompose(&[b'a'; 10]).count(), Some(89));
        assert_eq!(trie.decompose(&[b'a'; 10]).max_tokens, 10);
        assert_eq!(trie.decompose(&[b'a'; 10]).min_tokens, 5);
    }

    #[test]
    fn counts_past_u128_are_exact_big_integers() {
        let runs: Vec<String> = (1..=8).map(|k| "a".repeat(k)).collect();
        let refs: Vec<&str> = runs.iter().map(String::as_str).collect();
        let trie = trie_of(&refs);
        // Compositions of 200 into parts ≤ 8 exceed 2^128; check the recurrence on the big path.
        let long = trie.decompose(&[b'a'; 200]);
        assert_eq!(long.count(), None);
        let mut expected = vec![<BigUint as Zero>::zero(); 201];
        expected[0] = BigUint::from(1u8);
        for n in 1..=200 {
            let mut sum = <BigUint as Zero>::zero();
            for part in 1..=8.min(n) {
                sum += &expected[n - part];
            }
            expected[n] = sum;
        }
        assert_eq!(long.count_big(), expected[200]);
        assert!(long.count_f64() > 2f64.powi(128));
    }
}
