//! Tree attention on the native engine (see `crate::llama::tree` for the method): node `i` of a
//! token tree sits at position `cache.len() + depth(i)` and attends to the cache and to its own
//! path from the root, so a whole level of continuations runs in one batched pass.

use anyspec_cpu_kernels::Threads;

use super::cache::{KeyValues, NativeCache};
use super::{NativeLlama, ops};
use crate::error::{Error, Result};
use crate::llama::PrunedHead;
use crate::llama::{GrownTree, TreeNode, grow_tree};

/// The nodes of a token tree run so far below one KV cache.
#[derive(Clone, Debug)]
pub(crate) struct NativeTree {
    layers: Vec<KeyValues>,
    /// `[nodes, hidden]`, after the final norm.
    hidden: Vec<f32>,
    parents: Vec<Option<usize>>,
    depths: Vec<usize>,
    below: usize,
}

impl NativeTree {
    pub(crate) fn len(&self) -> usize {
        self.parents.len()
    }

    pub(crate) fn clear(&mut self) {
        self.layers.iter_mut().for_each(|l| *l = KeyValues::default());
        self.hidden.clear();
        self.parents.clear();
        self.depths.clear();
        self.below = 0;
    }
}

impl NativeLlama {
    pub(crate) fn new_tree(&self) -> NativeTree {
        NativeTree {
            layers: vec![KeyValues::default(); self.config.num_layers],
            hidden: Vec::new(),
            parents: Vec::new(),
            depths: Vec::new(),
            below: 0,
        }
    }

    /// Runs `nodes` as new nodes of `tree` below `cache` (read, not changed).
    pub(crate) fn extend_tree(
        &self,
        nodes: &[TreeNode],
        cache: &NativeCache,
        tree: &mut NativeTree,
        threads: &Threads,
    ) -> Result<()> {
        let c = &self.config;
        cache.check(c)?;
        let start = cache.len();
        let base = tree.len();
        let grown = grow_tree(c, tree.layers.len(), &tree.parents, &tree.depths, tree.below, start, nodes)?;
        let Some(GrownTree { parents, depths, .. }) = grown else { return Ok(()) };
        // Each new node's path from the root to itself.
        let paths: Vec<Vec<usize>> = (base..base + nodes.len())
            .map(|id| {
                let mut path = Vec::with_capacity(depths[id] + 1);
                let mut at = Some(id);
                while let Some(j) = at {
                    path.push(j);
                    at = parents[j];
                }
                path.reverse();
                path
            })
            .collect();

        let (head_dim, group) = (c.head_dim, c.num_heads / c.num_kv_heads);
        let kv_width = c.num_kv_heads * head_dim;
        let q_width = c.num_heads * head_dim;
        let window = c.sliding_window.unwrap_or(usize::MAX);
        let scale = 1.0 / (head_dim as f32).sqrt();
        let tokens: Vec<u32> = nodes.iter().map(|n| n.token).collect();
        let positions: Vec<usize> = depths[base..].iter().map(|d| start + d).collect();
        let layers = &mut tree.layers;
        let h = self.layers(&tokens, &positions, threads, &mut |index, queries, keys, values, out| {
            let own = &mut layers[index];
            own.keys.extend_from_slice(keys);
            own.values.extend_from_slice(values);
            let own = &layers[index];
            let cached = cache.layer(index);
            for (i, (query_row, out_row)) in
                queries.chunks_exact(q_width).zip(out.chunks_exact_mut(q_width)).enumerate()
            {
                let path = &paths[i];
                let depth = path.len() - 1;
                let query_position = start + depth;
                let first = (query_position + 1).saturating_sub(window).min(start);
                let from_cache = start - first;
                for (head, (q, o)) in
                    query_row.chunks_exact(head_dim).zip(out_row.chunks_exact_mut(head_dim)).enumerate()
                {
                    let kv_head = head / group;
                    ops::attend(
                        q,
                        from_cache + path.len(),
                        |j| match j.checked_sub(from_cache) {
                            None => cached.key(first + j, kv_head, head_dim, kv_width),
                            Some(p) => own.key(path[p], kv_head, head_dim, kv_width),
                        },
                        |j| match j.checked_sub(from_cache) {
                            None => cached.value(first + j, kv_head, head_dim, kv_width),
                            Some(p) => own.value(path[p], kv_head, head_dim, kv_width),
                        },
                        // An ancestor further back than the window is masked like a cache key.
                        |j| j < from_cache || depth - depths[path[j - from_cache]] < window,
                        scale,
                        o,
                    );
                }
            }
            Ok(())
        });
        let h = match h {
            Ok(h) => h,
            Err(e) => {
                // Some layers may hold the new nodes' keys already: forget the whole tree.
                tree.clear();
                return Err(e);
            }
        };
        tree.hidden.extend(self.final_norm(&h));
        tree.parents = parents;
        tree.depths = depths;
        tree.below = start;
        Ok(())
    }

    /// Logits after the nodes `rows` of `tree`, flat `[rows.len(), vocab or head.len()]`.
    pub(crate) fn tree_logits(
        &self,
        tree: &NativeTree,
        rows: &[usize],
        head: Option<&PrunedHead>,
        threads: &Threads,
    ) -> Result<Vec<f32>> {
        if rows.is_empty() {
            return Err(Error::InvalidArgument(
                "asked for the logits of no token-tree node; ask for at least one".into(),
            ));
        }
        if tree.len() == 0 {
            return Err(Error::InvalidArgument(
                "the token tree is empty; run its nodes with Llama::extend_tree".into(),
            ));
        }
        let hidden = self.config.hidden_size;
        let mut gathered = Vec::with_capacity(rows.len() * hidden);
        for &row in rows {
            if row >= tree.len() {
                return Err(Error::InvalidArgument(format!(
                    "asked for the logits of token-tree node {row} of a tree of {} nodes",
                    tree.len()
                )));
            }
            gathered.extend_from_slice(&tree.hidden[row * hidden..(row + 1) * hidden]);
        }
        self.logits(&gathered, head, threads)
    }
}
