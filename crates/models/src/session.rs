//! A model with its KV cache and the tokens the cache holds: reuses the longest common prefix
//! of successive calls, so callers just pass the whole sequence every time.

use burn::Tensor;

use crate::cache::KvCache;
use crate::error::{Error, Result};
use crate::llama::{Llama, PrunedHead, TreeNode};

/// A model plus the state of one sequence.
#[derive(Clone, Debug)]
pub struct Session {
    model: Llama,
    cache: KvCache,
    /// The tokens whose keys and values are in `cache` (same length).
    tokens: Vec<u32>,
}

impl Session {
    /// A session with an empty cache.
    pub fn new(model: Llama) -> Self {
        let cache = model.new_cache();
        Session { model, cache, tokens: Vec::new() }
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
        let logits = self.logits_pruned(sequence, rows, head)?;
        Ok(anyspec_kernels::readback::read_rows(logits)?)
    }

    /// The logits after the nodes `rows` of a token tree hung below `prefix`
    /// ([`Llama::forward_tree`]), over the full vocabulary or the rows of `head`, read back to
    /// the host, one vector per requested node.
    ///
    /// The cache is first brought to hold exactly `prefix` (reusing what it shares with the last
    /// call, running the rest as one ordinary pass); the tree's own positions never enter it.
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
            self.model.forward(&prefix[common..], &mut self.cache, 1)?;
            self.tokens.extend_from_slice(&prefix[common..]);
        }
        let logits = self.model.forward_tree(nodes, rows, &self.cache, head)?;
        Ok(anyspec_kernels::readback::read_rows(logits)?)
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
        let logits = self.logits(sequence, rows)?;
        Ok(anyspec_kernels::readback::read_rows(logits)?)
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
