//! Tree attention: scoring many continuations of one cached context in one forward pass.
//!
//! A drafter that must score every branch of a tree of continuations (SLRS expands the tree of
//! drafter-token sequences spelling target tokens) would otherwise make one forward pass per
//! branch. Here the nodes of a tree hang below the KV cache: node `i` sits at position
//! `cache.len() + depth(i)` and attends to the cache, its ancestors and itself. Instead of a
//! dense `[nodes, cache + nodes]` mask, each node's ancestors' keys and values are gathered
//! (`depth + 1` of them), so a pass costs `O(nodes · (cache + depth))`, and a [`TreeCache`] keeps
//! the keys, values and final hidden states of the nodes already run: a tree grown level by level
//! runs each node once.

use burn::tensor::activation::softmax;
use burn::tensor::{Int, Tensor, TensorData};

use super::{BurnLlama, PrunedHead};
use crate::blocks::rms_norm;
use crate::cache::BurnCache;
use crate::config::LlamaConfig;
use crate::error::{Error, Result};

/// One node of a token tree (see [`Llama::extend_tree`](crate::Llama::extend_tree)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeNode {
    /// The token at this node.
    pub token: u32,
    /// The index of the parent node, which must come earlier; `None` for a node that directly
    /// follows the cached sequence.
    pub parent: Option<usize>,
}

/// The nodes of a token tree run so far below one KV cache: their keys and values (what later
/// nodes attend to) and their final hidden states (what their logits are computed from).
///
/// Made by [`Llama::new_tree_cache`], grown by [`Llama::extend_tree`], read by
/// [`Llama::tree_logits`]. It belongs to the cache contents it was grown below: clear it when
/// the cache changes ([`Llama::extend_tree`] refuses a cache of another length).
#[derive(Clone, Debug)]
pub(crate) struct BurnTree {
    /// Per layer, `[kv_heads, nodes, head_dim]` keys and values.
    layers: Vec<Option<(Tensor<3>, Tensor<3>)>>,
    /// `[nodes, hidden]`, after the final norm.
    hidden: Option<Tensor<2>>,
    parents: Vec<Option<usize>>,
    depths: Vec<usize>,
    /// The cache length the tree hangs below.
    below: usize,
}

impl BurnTree {
    /// Number of nodes run so far.
    pub(crate) fn len(&self) -> usize {
        self.parents.len()
    }

    /// Forgets every node (for a new tree, or after the KV cache changed).
    pub(crate) fn clear(&mut self) {
        self.layers.iter_mut().for_each(|l| *l = None);
        self.hidden = None;
        self.parents.clear();
        self.depths.clear();
        self.below = 0;
    }
}

/// A token tree's shape (each node's parent and depth) grown by new nodes.
pub(crate) struct GrownTree {
    pub(crate) parents: Vec<Option<usize>>,
    pub(crate) depths: Vec<usize>,
    /// The depth of the deepest new node.
    pub(crate) deepest: usize,
}

/// Checks `nodes` as new nodes of a token tree made for `tree_layers` layers (its nodes'
/// `parents` and `depths`, hung below a cache of `below` positions) that is to grow below a
/// cache of `start` positions, and returns its shape with the new nodes appended (`None` when
/// there are none). Both engines' trees grow through it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn grow_tree(
    config: &LlamaConfig,
    tree_layers: usize,
    parents: &[Option<usize>],
    depths: &[usize],
    below: usize,
    start: usize,
    nodes: &[TreeNode],
) -> Result<Option<GrownTree>> {
    if tree_layers != config.num_layers {
        return Err(Error::InvalidArgument(format!(
            "the token tree was made for {tree_layers} layers but the model has {}; make it with Llama::new_tree_cache",
            config.num_layers
        )));
    }
    if nodes.is_empty() {
        return Ok(None);
    }
    if !parents.is_empty() && below != start {
        return Err(Error::InvalidArgument(format!(
            "the token tree hangs below a cache of {below} positions but the cache now holds {start}; \
             clear the tree (TreeCache::clear) when the cache changes"
        )));
    }
    let base = parents.len();
    let mut parents = parents.to_vec();
    let mut depths = depths.to_vec();
    for (i, node) in nodes.iter().enumerate() {
        if node.token as usize >= config.vocab_size {
            return Err(Error::TokenOutOfRange { token: node.token, vocab_size: config.vocab_size });
        }
        let id = base + i;
        let depth = match node.parent {
            None => 0,
            Some(parent) if parent < id => depths[parent] + 1,
            Some(parent) => {
                return Err(Error::InvalidArgument(format!(
                    "token-tree node {id} names node {parent} as its parent; a parent must come \
                     before its children"
                )));
            }
        };
        parents.push(node.parent);
        depths.push(depth);
    }
    let deepest = depths[base..].iter().max().copied().unwrap_or(0);
    if start + deepest + 1 > config.max_position_embeddings {
        return Err(Error::ContextFull { needed: start + deepest + 1, max: config.max_position_embeddings });
    }
    Ok(Some(GrownTree { parents, depths, deepest }))
}

impl BurnLlama {
    /// An empty token tree for this model.
    pub(crate) fn new_tree_cache(&self) -> BurnTree {
        BurnTree {
            layers: vec![None; self.config.num_layers],
            hidden: None,
            parents: Vec::new(),
            depths: Vec::new(),
            below: 0,
        }
    }

    /// Runs `nodes` as new nodes of `tree`, hung below `cache` (read, not changed). Node `i` of
    /// `nodes` becomes node `tree.len() + i`; its parent is any node of the tree or an earlier
    /// new node, by that numbering.
    pub(crate) fn extend_tree(&self, nodes: &[TreeNode], cache: &BurnCache, tree: &mut BurnTree) -> Result<()> {
        let c = &self.config;
        self.check_cache(cache)?;
        let start = cache.len();
        let base = tree.len();
        let grown = grow_tree(c, tree.layers.len(), &tree.parents, &tree.depths, tree.below, start, nodes)?;
        let Some(GrownTree { parents, depths, deepest }) = grown else { return Ok(()) };
        let new_depths = &depths[base..];

        // Each new node's ancestors and itself, root first, padded to the deepest path with the
        // node itself under a −∞ mask (a sliding window masks far ancestors the same way).
        let len = nodes.len();
        let width = deepest + 1;
        let window = c.sliding_window.unwrap_or(usize::MAX);
        let mut gather = Vec::with_capacity(len * width);
        let mut path_mask = Vec::with_capacity(len * width);
        let mut path = Vec::with_capacity(width);
        for (i, &depth) in new_depths.iter().enumerate() {
            path.clear();
            let mut at = Some(base + i);
            while let Some(j) = at {
                path.push(j);
                at = parents[j];
            }
            path.reverse();
            for slot in 0..width {
                match path.get(slot) {
                    Some(&j) => {
                        gather.push(j as i64);
                        path_mask.push(if depth - depths[j] < window { 0.0 } else { f32::NEG_INFINITY });
                    }
                    None => {
                        gather.push((base + i) as i64);
                        path_mask.push(f32::NEG_INFINITY);
                    }
                }
            }
        }
        // Keys of the cache that a node at depth d may see: all of them unless a sliding window
        // cuts the oldest.
        let cache_mask = (start > 0 && start + deepest >= window).then(|| {
            let mut mask = Vec::with_capacity(len * start);
            for &depth in new_depths {
                let query = start + depth;
                mask.extend((0..start).map(|key| if query - key < window { 0.0 } else { f32::NEG_INFINITY }));
            }
            Tensor::<4>::from_data(TensorData::new(mask, [1, len, 1, start]), &self.device)
        });
        let gather = Tensor::<1, Int>::from_data(TensorData::new(gather, [len * width]), &self.device);
        let path_mask = Tensor::<4>::from_data(TensorData::new(path_mask, [1, len, 1, width]), &self.device);

        let (heads, kv_heads, head_dim) = (c.num_heads, c.num_kv_heads, c.head_dim);
        let group = heads / kv_heads;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let tokens: Vec<u32> = nodes.iter().map(|n| n.token).collect();
        let positions: Vec<usize> = new_depths.iter().map(|d| start + d).collect();
        let layers = &mut tree.layers;
        let h = self.layers(&tokens, &positions, &mut |index, layer, x, cos, sin| {
            let [q, k, v] = self.project(layer, x, cos, sin);
            let (tree_k, tree_v) = match layers[index].take() {
                Some((old_k, old_v)) => (Tensor::cat(vec![old_k, k], 1), Tensor::cat(vec![old_v, v], 1)),
                None => (k, v),
            };
            layers[index] = Some((tree_k.clone(), tree_v.clone()));
            let path_k = tree_k.select(1, gather.clone()).reshape([kv_heads, len, width, head_dim]);
            let path_v = tree_v.select(1, gather.clone()).reshape([kv_heads, len, width, head_dim]);
            // [kv_heads, nodes, group, head_dim]: the query heads sharing a key/value head.
            let q = q.reshape([kv_heads, group, len, head_dim]).swap_dims(1, 2);
            let path_scores = q.clone().matmul(path_k.swap_dims(2, 3)).mul_scalar(scale) + path_mask.clone();
            let out = match cache.layer(index) {
                Some((cache_k, cache_v)) => {
                    let scores = q
                        .reshape([kv_heads, len * group, head_dim])
                        .matmul(cache_k.clone().swap_dims(1, 2))
                        .mul_scalar(scale)
                        .reshape([kv_heads, len, group, start]);
                    let scores = match &cache_mask {
                        Some(mask) => scores + mask.clone(),
                        None => scores,
                    };
                    let weights = softmax(Tensor::cat(vec![scores, path_scores], 3), 3);
                    let cache_weights = weights.clone().narrow(3, 0, start).reshape([kv_heads, len * group, start]);
                    let from_cache = cache_weights.matmul(cache_v.clone()).reshape([kv_heads, len, group, head_dim]);
                    from_cache + weights.narrow(3, start, width).matmul(path_v)
                }
                None => softmax(path_scores, 3).matmul(path_v),
            };
            let out =
                out.swap_dims(1, 2).reshape([heads, len, head_dim]).swap_dims(0, 1).reshape([len, heads * head_dim]);
            layer.o_proj.forward(out)
        });
        let h = rms_norm(h, &self.norm, c.rms_norm_eps);
        tree.hidden = Some(match tree.hidden.take() {
            Some(old) => Tensor::cat(vec![old, h], 0),
            None => h,
        });
        tree.parents = parents;
        tree.depths = depths;
        tree.below = start;
        Ok(())
    }

    /// The logits after the nodes `rows` of `tree`, `[rows.len(), vocab]`
    /// (`[rows.len(), head.len()]` with a pruned head): for node `i`, the last row of an
    /// ordinary forward pass over the cache followed by the path from the root to node `i`.
    pub(crate) fn tree_logits(&self, tree: &BurnTree, rows: &[usize], head: Option<&PrunedHead>) -> Result<Tensor<2>> {
        if rows.is_empty() {
            return Err(Error::InvalidArgument(
                "asked for the logits of no token-tree node; ask for at least one".into(),
            ));
        }
        let (Some(hidden), Some(&row)) = (&tree.hidden, rows.iter().max()) else {
            return Err(Error::InvalidArgument(
                "the token tree is empty; run its nodes with Llama::extend_tree".into(),
            ));
        };
        if row >= tree.len() {
            return Err(Error::InvalidArgument(format!(
                "asked for the logits of token-tree node {row} of a tree of {} nodes",
                tree.len()
            )));
        }
        let index: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        let index = Tensor::<1, Int>::from_data(TensorData::new(index, [rows.len()]), &self.device);
        let h = hidden.clone().select(0, index);
        Ok(match head {
            Some(head) => self.pruned_logits(h, head)?,
            None => h.matmul(self.lm_head.clone()),
        })
    }
}
