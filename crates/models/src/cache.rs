//! The key/value cache: appends during a forward pass, truncates after a rejected draft.

use burn::Tensor;

/// Keys and values of every layer for the tokens seen so far, `[kv_heads, len, head_dim]` each.
///
/// Rolling back after a rejection is [`KvCache::truncate`]: positions past the accepted prefix
/// are dropped and the next forward pass overwrites them.
#[derive(Clone, Debug)]
pub(crate) struct BurnCache {
    layers: Vec<Option<(Tensor<3>, Tensor<3>)>>,
    len: usize,
}

impl BurnCache {
    /// An empty cache for a model with `num_layers` layers.
    pub(crate) fn new(num_layers: usize) -> Self {
        BurnCache { layers: vec![None; num_layers], len: 0 }
    }

    /// Number of cached positions.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Keeps the first `len` positions; a `len` at or past the end changes nothing.
    pub(crate) fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        for entry in &mut self.layers {
            if len == 0 {
                *entry = None;
            } else if let Some((k, v)) = entry.take() {
                *entry = Some((k.narrow(1, 0, len), v.narrow(1, 0, len)));
            }
        }
        self.len = len;
    }

    /// Number of layers the cache was made for.
    pub(crate) fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Appends a layer's new keys and values and returns the layer's whole keys and values.
    pub(crate) fn append(&mut self, layer: usize, k: Tensor<3>, v: Tensor<3>) -> (Tensor<3>, Tensor<3>) {
        let (k, v) = match self.layers[layer].take() {
            Some((old_k, old_v)) => (Tensor::cat(vec![old_k, k], 1), Tensor::cat(vec![old_v, v], 1)),
            None => (k, v),
        };
        self.layers[layer] = Some((k.clone(), v.clone()));
        (k, v)
    }

    /// A layer's cached keys and values, `[kv_heads, len, head_dim]` each, or `None` while the
    /// cache is empty.
    pub(crate) fn layer(&self, layer: usize) -> Option<&(Tensor<3>, Tensor<3>)> {
        self.layers[layer].as_ref()
    }

    /// Records that a forward pass appended `new_positions` to every layer.
    pub(crate) fn advance(&mut self, new_positions: usize) {
        self.len += new_positions;
    }
}
