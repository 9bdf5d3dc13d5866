//! A model with its KV cache and the tokens the cache holds: reuses the longest common prefix
//! of successive calls, so callers just pass the whole sequence every time.

use burn::Tensor;

use crate::error::{Error, Result};
use std::collections::HashMap;

use crate::llama::{PrunedHead, TreeNode};
use crate::model::{KvCache, Llama, TreeCache};

/// Most token-tree nodes run, or logit rows read, in one pass.
const TREE_CHUNK: usize = 1024;

/// What [`Session::logits_and_features_on_host`] ran and read.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFeatures {
    /// The first position run (the cache held the sequence before it).
    pub start: usize,
    /// The final-norm hidden state of every position run, `[run, hidden]` flat.
    pub features: Vec<f32>,
    /// The logits of the last rows asked for.
    pub logits: Vec<Vec<f32>>,
}

/// A model plus the state of one sequence.
#[derive(Clone, Debug)]
pub struct Session {
    model: Llama,
    cache: KvCache,
    /// The tokens whose keys and values are in `cache` (same length).
    tokens: Vec<u32>,
    /// The token tree run below `tree_below` (a copy of `tokens` when it was grown), and its
    /// nodes by (parent, token), so that a tree asked for again, grown, or renumbered reuses
    /// the nodes already run.
    tree: TreeCache,
    tree_below: Vec<u32>,
    tree_index: HashMap<(Option<usize>, u32), usize>,
}

impl Session {
    /// A session with an empty cache.
    pub fn new(model: Llama) -> Self {
        let cache = model.new_cache();
        let tree = model.new_tree_cache();
        Session { model, cache, tokens: Vec::new(), tree, tree_below: Vec::new(), tree_index: HashMap::new() }
    }

    /// The model.
    pub fn model(&self) -> &Llama {
        &self.model
    }

    /// The tokens whose keys and values are cached.
    pub fn cached_tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The logits `[rows, vocab]` of the last `rows` positions of `sequence`, still on the device.
    ///
    /// Positions already in the cache (the longest common prefix with the last call) are not
    /// recomputed; the cache is truncated where `sequence` departs from it, and at least `rows`
    /// positions are run so that their logits exist.
    pub fn logits(&mut self, sequence: &[u32], rows: usize) -> Result<Tensor<2>> {
        let keep = self.prepare(sequence, rows)?;
        let logits = self.model.forward(&sequence[keep..], &mut self.cache, rows)?;
        self.tokens.extend_from_slice(&sequence[keep..]);
        Ok(logits)
    }

    /// [`Session::logits`] over only the vocabulary rows of `head` (a pruned LM head),
    /// `[rows, head.len()]`, still on the device.
    pub fn logits_pruned(&mut self, sequence: &[u32], rows: usize, head: &PrunedHead) -> Result<Tensor<2>> {
        let keep = self.prepare(sequence, rows)?;
        let logits = self.model.forward_pruned(&sequence[keep..], &mut self.cache, rows, head)?;
        self.tokens.extend_from_slice(&sequence[keep..]);
        Ok(logits)
    }

    /// [`Session::logits_pruned`] read back to the host, one vector per row.
    pub fn logits_pruned_on_host(&mut self, sequence: &[u32], rows: usize, head: &PrunedHead) -> Result<Vec<Vec<f32>>> {
        self.run_on_host(sequence, rows, Some(head))
    }

    /// Runs what `sequence` adds to the cache and reads the last `rows` logit rows to the host.
    fn run_on_host(&mut self, sequence: &[u32], rows: usize, head: Option<&PrunedHead>) -> Result<Vec<Vec<f32>>> {
        let keep = self.prepare(sequence, rows)?;
        let logits = self.model.forward_on_host(&sequence[keep..], &mut self.cache, rows, head)?;
        self.tokens.extend_from_slice(&sequence[keep..]);
        Ok(logits)
    }

    /// The logits after the nodes `rows` of a token tree hung below `prefix`
    /// ([`Llama::forward_tree`]), over the full vocabulary or the rows of `head`, read back to
    /// the host, one vector per requested node.
    ///
    /// The cache is first brought to hold exactly `prefix` (reusing what it shares with the last
    /// call, running the rest as one ordinary pass); the tree's own positions never enter it.
    /// While the prefix stays the same, the session keeps the tree's nodes: nodes with the same
    /// path as one run before (in any numbering) are not run again, so a tree grown level by
    /// level costs one pass over its new nodes per call.
    pub fn tree_logits_on_host(
        &mut self,
        prefix: &[u32],
        nodes: &[TreeNode],
        rows: &[usize],
        head: Option<&PrunedHead>,
    ) -> Result<Vec<Vec<f32>>> {
        let common = self.tokens.iter().zip(prefix).take_while(|(a, b)| a == b).count();
        self.truncate(common);
        if common < prefix.len() {
            self.model.forward_on_host(&prefix[common..], &mut self.cache, 1, None)?;
            self.tokens.extend_from_slice(&prefix[common..]);
        }
        if self.tree_below != self.tokens {
            self.clear_tree();
            self.tree_below.clone_from(&self.tokens);
        }
        // Number the request's nodes as the session's tree does; the unseen ones are new.
        let mut ids = Vec::with_capacity(nodes.len());
        let mut new = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let parent = match node.parent {
                None => None,
                Some(p) if p < i => Some(ids[p]),
                Some(p) => {
                    // Nodes numbered so far were indexed but not run: forget the tree.
                    self.clear_tree();
                    return Err(Error::InvalidArgument(format!(
                        "token-tree node {i} names node {p} as its parent; a parent must come before its children"
                    )));
                }
            };
            let next = self.tree.len() + new.len();
            let id = *self.tree_index.entry((parent, node.token)).or_insert_with(|| {
                new.push(TreeNode { token: node.token, parent });
                next
            });
            ids.push(id);
        }
        // In chunks, so that a level of many thousand nodes never needs activations (and
        // logits) for all of them at once; parents come first, so every chunk's are already run.
        for chunk in new.chunks(TREE_CHUNK) {
            if let Err(e) = self.model.extend_tree(chunk, &self.cache, &mut self.tree) {
                self.clear_tree();
                return Err(e);
            }
        }
        let rows = rows
            .iter()
            .map(|&r| {
                ids.get(r).copied().ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "asked for the logits of token-tree node {r} of a tree of {} nodes",
                        nodes.len()
                    ))
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for chunk in rows.chunks(TREE_CHUNK) {
            out.extend(self.model.tree_logits_on_host(&self.tree, chunk, head)?);
        }
        Ok(out)
    }

    fn clear_tree(&mut self) {
        self.tree.clear();
        self.tree_index.clear();
        self.tree_below.clear();
    }

    /// Checks the request and truncates the cache to what `sequence` shares with it; returns
    /// the number of positions kept.
    fn prepare(&mut self, sequence: &[u32], rows: usize) -> Result<usize> {
        if rows == 0 || rows > sequence.len() {
            return Err(Error::InvalidArgument(format!(
                "asked for the logits of {rows} positions of a {}-token sequence; ask for 1..={}",
                sequence.len(),
                sequence.len()
            )));
        }
        let common = self.tokens.iter().zip(sequence).take_while(|(a, b)| a == b).count();
        let keep = common.min(sequence.len() - rows);
        self.truncate(keep);
        Ok(keep)
    }

    /// [`Session::logits`] read back to the host, one vector per row.
    pub fn logits_on_host(&mut self, sequence: &[u32], rows: usize) -> Result<Vec<Vec<f32>>> {
        self.run_on_host(sequence, rows, None)
    }

    /// [`Session::logits_on_host`] that also returns the final-norm hidden state of every
    /// position it ran (what a feature drafter reads): the first position run, those hidden
    /// rows `[run, hidden]` flat, and the last `rows` logit rows.
    pub fn logits_and_features_on_host(&mut self, sequence: &[u32], rows: usize) -> Result<RunFeatures> {
        let keep = self.prepare(sequence, rows)?;
        let new = &sequence[keep..];
        let hidden = self.model.config().hidden_size;
        let features = match self.model.native() {
            Some((native, threads)) => {
                let cache = self.cache.native_mut().ok_or_else(|| {
                    Error::InvalidArgument("the session's cache is not the native engine's, but its model is".into())
                })?;
                native.final_hidden(new, cache, new.len(), threads)?
            }
            None => self.model.forward_with_hidden(new, &mut self.cache, new.len(), None)?.hidden.concat(),
        };
        self.tokens.extend_from_slice(new);
        let last = &features[(new.len() - rows) * hidden..];
        let logits = self.model.logits_of_hidden(last, None)?;
        let logits = logits.chunks_exact(self.model.config().vocab_size).map(<[f32]>::to_vec).collect();
        Ok(RunFeatures { start: keep, features, logits })
    }

    /// Keeps the cache for the first `len` tokens (rollback after a rejection).
    pub fn truncate(&mut self, len: usize) {
        self.cache.truncate(len);
        self.tokens.truncate(len);
    }

    /// Forgets the sequence.
    pub fn reset(&mut self) {
        self.truncate(0);
    }
}
