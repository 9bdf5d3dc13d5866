//! The string space SLRS walks in: the byte trie of the target's token surfaces, and for every
//! trie node the drafter tokens that keep the spelled string inside the trie.

use crate::error::{Error, Result};

/// The root of the target trie (the empty string).
pub(crate) const ROOT: u32 = 0;

/// The target and drafter vocabularies, seen as byte strings, prepared for SLRS.
///
/// Built once per (target, drafter) pair; every walk and every ψ expansion reads it.
///
/// - Node `u` of the target trie is a byte string that prefixes at least one target surface.
/// - `token(u)` is the target token whose surface is exactly `u`. When several target tokens share
///   one surface (byte-fallback tokens, duplicated added tokens), the smallest id stands for the
///   string; the others are never proposed, which costs acceptance but not exactness (they are
///   reached through the residual like any token the drafter cannot spell).
/// - `moves(u)` are the pairs `(d, v)` such that appending drafter token `d`'s surface to `u`
///   gives trie node `v`. A drafter token not among the moves of `u` leaves the trie: after it, no
///   target token can be spelled, and the walk stops.
/// - `reachable(u)`: some target token strictly below `u` can still be reached at a drafter-token
///   boundary. When it is false the walk's proposal can no longer change, so the walk stops
///   there without sampling further (this only saves work; the proposal's law is the same).
///
/// Tokens without a surface (special tokens, or ids past the tokenizer in a padded embedding)
/// take no part: a drafter token without a surface ends the walk, and a target token without
/// one is never proposed.
#[derive(Clone, Debug)]
pub struct StringSpace {
    target_vocab_size: usize,
    drafter_vocab_size: usize,
    /// Smallest drafter-row length the moves need (largest drafter id with a surface, plus one).
    drafter_ids_needed: usize,
    /// Per node: the target token spelled exactly by the node, `u32::MAX` for none.
    node_token: Vec<u32>,
    /// Per node: its depth in bytes.
    depth: Vec<u32>,
    reachable: Vec<bool>,
    move_start: Vec<u32>,
    move_token: Vec<u32>,
    move_node: Vec<u32>,
    proposable: usize,
    /// Per node: the longest target surface that is a prefix of the node's string (the node's
    /// own token included), `NO_TOKEN` for none: the first token of the string under longest-
    /// prefix tokenization, for [`super::ProposalRule::FirstTargetToken`].
    first_token: Vec<u32>,
    /// The target trie's edges, CSR by node: `child_start[u]..child_start[u + 1]` index
    /// `child_byte` (sorted) and `child_node`.
    child_start: Vec<u32>,
    child_byte: Vec<u8>,
    child_node: Vec<u32>,
    /// Drafter surfaces by id, concatenated: `drafter_bytes[drafter_start[d]..drafter_start[d + 1]]`
    /// (empty for a token without a surface).
    drafter_bytes: Vec<u8>,
    drafter_start: Vec<u32>,
}

/// Where appending one drafter token to a trie node's string goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The string stays inside the trie (the token is one of the node's moves).
    Move,
    /// The string leaves the trie (or the token has no surface): the longest target surface
    /// that is a prefix of the new string, if any.
    Leaves(Option<u32>),
}

const NO_TOKEN: u32 = u32::MAX;

/// A byte trie with sorted child lists, used while building.
struct Trie {
    children: Vec<Vec<(u8, u32)>>,
    /// Token ids ending at each node.
    tokens: Vec<Vec<u32>>,
}

impl Trie {
    fn build<'a>(surfaces: impl Iterator<Item = (u32, &'a [u8])>) -> Trie {
        let mut trie = Trie { children: vec![Vec::new()], tokens: vec![Vec::new()] };
        for (id, surface) in surfaces {
            let mut node = ROOT as usize;
            for &byte in surface {
                node = match trie.children[node].binary_search_by_key(&byte, |&(b, _)| b) {
                    Ok(at) => trie.children[node][at].1 as usize,
                    Err(at) => {
                        let child = trie.children.len();
                        trie.children[node].insert(at, (byte, child as u32));
                        trie.children.push(Vec::new());
                        trie.tokens.push(Vec::new());
                        child
                    }
                };
            }
            trie.tokens[node].push(id);
        }
        trie
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let edges = &self.children[node as usize];
        edges.binary_search_by_key(&byte, |&(b, _)| b).ok().map(|at| edges[at].1)
    }
}

/// The `(id, surface)` pairs of the tokens with a non-empty surface.
fn with_surface<'a>(surfaces: &[Option<&'a [u8]>]) -> Vec<(u32, &'a [u8])> {
    surfaces.iter().enumerate().filter_map(|(id, s)| s.filter(|s| !s.is_empty()).map(|s| (id as u32, s))).collect()
}

impl StringSpace {
    /// Prepares the pair from each vocabulary's byte surfaces, indexed by token id (`None` or an
    /// empty surface for special tokens).
    ///
    /// `target_vocab_size` and `drafter_vocab_size` are the lengths of the models' probability
    /// rows, at least as long as the surface lists (checkpoints pad their embeddings).
    pub fn new(
        target_surfaces: &[Option<&[u8]>],
        target_vocab_size: usize,
        drafter_surfaces: &[Option<&[u8]>],
        drafter_vocab_size: usize,
    ) -> Result<StringSpace> {
        for (what, surfaces, size) in [
            ("target vocabulary size", target_surfaces, target_vocab_size),
            ("drafter vocabulary size", drafter_surfaces, drafter_vocab_size),
        ] {
            if size < surfaces.len() {
                return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                    name: what,
                    expected: "at least the number of token surfaces",
                    value: format!("{size} for {} surfaces", surfaces.len()),
                }));
            }
        }
        if target_vocab_size > u32::MAX as usize - 1 || drafter_vocab_size > u32::MAX as usize - 1 {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "vocabulary size",
                expected: "below 2^32 − 1",
                value: target_vocab_size.max(drafter_vocab_size).to_string(),
            }));
        }
        let target_tokens = with_surface(target_surfaces);
        let drafter_tokens = with_surface(drafter_surfaces);
        if target_tokens.is_empty() || drafter_tokens.is_empty() {
            return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                name: "token surfaces",
                expected: "at least one non-empty surface in each vocabulary",
                value: format!("{} target and {} drafter surfaces", target_tokens.len(), drafter_tokens.len()),
            }));
        }
        let drafter_ids_needed = drafter_tokens.iter().map(|&(id, _)| id as usize + 1).max().unwrap_or(0);
        let target = Trie::build(target_tokens.into_iter());
        let drafter = Trie::build(drafter_tokens.into_iter());

        let nodes = target.children.len();
        let mut node_token = vec![NO_TOKEN; nodes];
        let mut depth = vec![0u32; nodes];
        for node in 0..nodes {
            node_token[node] = target.tokens[node].iter().copied().min().unwrap_or(NO_TOKEN);
            for &(_, child) in &target.children[node] {
                depth[child as usize] = depth[node] + 1;
            }
        }
        let proposable = node_token.iter().filter(|&&t| t != NO_TOKEN).count();

        // Moves: walk the drafter trie and the target trie together from every target node.
        let mut move_start = Vec::with_capacity(nodes + 1);
        let mut move_token = Vec::new();
        let mut move_node = Vec::new();
        let mut stack = Vec::new();
        for node in 0..nodes as u32 {
            move_start.push(move_token.len() as u32);
            stack.clear();
            stack.push((node, ROOT));
            while let Some((at, in_drafter)) = stack.pop() {
                if in_drafter != ROOT {
                    for &d in &drafter.tokens[in_drafter as usize] {
                        move_token.push(d);
                        move_node.push(at);
                    }
                }
                for &(byte, drafter_child) in &drafter.children[in_drafter as usize] {
                    if let Some(target_child) = target.child(at, byte) {
                        stack.push((target_child, drafter_child));
                    }
                }
            }
            if move_token.len() > u32::MAX as usize {
                return Err(Error::InvalidParameter(anyspec_core::InvalidParameter {
                    name: "vocabulary pair",
                    expected: "fewer than 2^32 (node, drafter token) moves",
                    value: move_token.len().to_string(),
                }));
            }
        }
        move_start.push(move_token.len() as u32);

        // Children are deeper than their parents, so one pass from the deepest node up settles
        // reachability.
        let mut order: Vec<u32> = (0..nodes as u32).collect();
        order.sort_unstable_by_key(|&n| std::cmp::Reverse(depth[n as usize]));
        let mut reachable = vec![false; nodes];
        for &node in &order {
            let (start, end) = (move_start[node as usize] as usize, move_start[node as usize + 1] as usize);
            reachable[node as usize] =
                move_node[start..end].iter().any(|&v| node_token[v as usize] != NO_TOKEN || reachable[v as usize]);
        }

        // Longest surface prefix of each node's string: parents come before children in depth
        // order, so one pass from the root down settles it.
        let mut first_token = vec![NO_TOKEN; nodes];
        let mut by_depth: Vec<u32> = (0..nodes as u32).collect();
        by_depth.sort_unstable_by_key(|&n| depth[n as usize]);
        let mut child_start = Vec::with_capacity(nodes + 1);
        let mut child_byte = Vec::new();
        let mut child_node = Vec::new();
        for node in 0..nodes {
            child_start.push(child_byte.len() as u32);
            for &(byte, child) in &target.children[node] {
                child_byte.push(byte);
                child_node.push(child);
            }
        }
        child_start.push(child_byte.len() as u32);
        for &node in &by_depth {
            let own = node_token[node as usize];
            if own != NO_TOKEN {
                first_token[node as usize] = own;
            }
            let inherited = first_token[node as usize];
            for &(_, child) in &target.children[node as usize] {
                first_token[child as usize] = inherited;
            }
        }
        let mut drafter_bytes = Vec::new();
        let mut drafter_start = Vec::with_capacity(drafter_surfaces.len() + 1);
        for surface in drafter_surfaces {
            drafter_start.push(drafter_bytes.len() as u32);
            drafter_bytes.extend_from_slice(surface.unwrap_or(&[]));
        }
        drafter_start.push(drafter_bytes.len() as u32);

        Ok(StringSpace {
            first_token,
            child_start,
            child_byte,
            child_node,
            drafter_bytes,
            drafter_start,
            target_vocab_size,
            drafter_vocab_size,
            drafter_ids_needed,
            node_token,
            depth,
            reachable,
            move_start,
            move_token,
            move_node,
            proposable,
        })
    }

    /// Length of the target's probability rows (and of every ψ row).
    pub fn target_vocab_size(&self) -> usize {
        self.target_vocab_size
    }

    /// Length of the drafter's probability rows.
    pub fn drafter_vocab_size(&self) -> usize {
        self.drafter_vocab_size
    }

    /// Number of trie nodes (distinct prefixes of target surfaces, the empty one included).
    pub fn node_count(&self) -> usize {
        self.node_token.len()
    }

    /// Number of target tokens SLRS can propose (one per distinct non-empty surface).
    pub fn proposable_tokens(&self) -> usize {
        self.proposable
    }

    /// Total number of (node, drafter token) moves: the work of scanning every node once.
    pub fn move_count(&self) -> usize {
        self.move_token.len()
    }

    /// Longest target surface, in bytes.
    pub fn max_surface_len(&self) -> usize {
        self.depth.iter().copied().max().unwrap_or(0) as usize
    }

    pub(crate) fn drafter_ids_needed(&self) -> usize {
        self.drafter_ids_needed
    }

    /// The target token spelled exactly by `node`.
    pub(crate) fn token(&self, node: u32) -> Option<u32> {
        let t = self.node_token[node as usize];
        (t != NO_TOKEN).then_some(t)
    }

    pub(crate) fn reachable(&self, node: u32) -> bool {
        self.reachable[node as usize]
    }

    /// Whether some target surface has `node`'s string as a proper prefix: while it does, the
    /// first target token of a longer string is not yet determined.
    pub(crate) fn extendable(&self, node: u32) -> bool {
        self.child_start[node as usize] < self.child_start[node as usize + 1]
    }

    /// The longest target surface that is a prefix of `node`'s string.
    pub(crate) fn first_token(&self, node: u32) -> Option<u32> {
        let t = self.first_token[node as usize];
        (t != NO_TOKEN).then_some(t)
    }

    fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let (start, end) = (self.child_start[node as usize] as usize, self.child_start[node as usize + 1] as usize);
        self.child_byte[start..end].binary_search(&byte).ok().map(|at| self.child_node[start + at])
    }

    /// Appends drafter token `d`'s surface to `node`'s string, byte by byte down the trie.
    pub(crate) fn step(&self, node: u32, d: u32) -> Step {
        let d = d as usize;
        if d + 1 >= self.drafter_start.len() {
            return Step::Leaves(self.first_token(node));
        }
        let surface = &self.drafter_bytes[self.drafter_start[d] as usize..self.drafter_start[d + 1] as usize];
        if surface.is_empty() {
            return Step::Leaves(self.first_token(node));
        }
        let mut at = node;
        for &byte in surface {
            match self.child(at, byte) {
                Some(next) => at = next,
                None => return Step::Leaves(self.first_token(at)),
            }
        }
        Step::Move
    }

    /// The moves `(drafter token, next node)` out of `node`.
    pub(crate) fn moves(&self, node: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (start, end) = (self.move_start[node as usize] as usize, self.move_start[node as usize + 1] as usize);
        self.move_token[start..end].iter().copied().zip(self.move_node[start..end].iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(target: &[&str], drafter: &[&str]) -> StringSpace {
        let t: Vec<Option<&[u8]>> = target.iter().map(|s| Some(s.as_bytes())).collect();
        let d: Vec<Option<&[u8]>> = drafter.iter().map(|s| Some(s.as_bytes())).collect();
        StringSpace::new(&t, t.len(), &d, d.len()).unwrap()
    }

    fn node_of(space: &StringSpace, path: &[u32]) -> u32 {
        // Follow drafter tokens from the root.
        let mut node = ROOT;
        for &d in path {
            node = space.moves(node).find(|&(t, _)| t == d).map(|(_, v)| v).unwrap();
        }
        node
    }

    #[test]
    fn moves_follow_multi_byte_drafter_tokens_and_stop_outside_the_trie() {
        // Target: "a", "ab", "abc"; drafter: "a", "b", "bc", "x".
        let s = space(&["a", "ab", "abc"], &["a", "b", "bc", "x"]);
        assert_eq!(s.node_count(), 4);
        let mut root_moves: Vec<_> = s.moves(ROOT).map(|(d, _)| d).collect();
        root_moves.sort_unstable();
        assert_eq!(root_moves, vec![0]);
        let a = node_of(&s, &[0]);
        assert_eq!(s.token(a), Some(0));
        let mut from_a: Vec<_> = s.moves(a).map(|(d, v)| (d, s.token(v))).collect();
        from_a.sort_unstable();
        assert_eq!(from_a, vec![(1, Some(1)), (2, Some(2))]);
        assert!(s.reachable(a));
        assert!(!s.reachable(node_of(&s, &[0, 2])));
        assert_eq!(s.proposable_tokens(), 3);
    }

    #[test]
    fn a_token_unreachable_at_a_boundary_does_not_keep_the_walk_alive() {
        // "ab" can only be spelled through "a" + "b", and the drafter has no "b".
        let s = space(&["a", "ab"], &["a", "c"]);
        assert!(!s.reachable(node_of(&s, &[0])));
        assert!(s.reachable(ROOT));
    }

    #[test]
    fn shared_surfaces_are_proposed_by_the_smallest_id_and_empty_ones_never() {
        let t: Vec<Option<&[u8]>> = vec![None, Some(b"a"), Some(b"a"), Some(b"")];
        let d: Vec<Option<&[u8]>> = vec![Some(b"a")];
        let s = StringSpace::new(&t, 6, &d, 1).unwrap();
        assert_eq!(s.token(node_of(&s, &[0])), Some(1));
        assert_eq!(s.proposable_tokens(), 1);
    }

    #[test]
    fn bad_vocabularies_are_errors() {
        let d: Vec<Option<&[u8]>> = vec![Some(b"a")];
        assert!(StringSpace::new(&[None], 1, &d, 1).is_err());
        assert!(StringSpace::new(&[Some(b"a")], 0, &d, 1).is_err());
    }
}
