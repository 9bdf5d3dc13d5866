//! [`HeadBlocks`]: a partition of the vocabulary into blocks (DynaSpec's token clusters, the
//! segments of a frequency ranking) for shortlists made of whole blocks, and, on the native
//! engine, a copy of the LM head ordered block by block so that such a shortlist's head product
//! reads its own rows and nothing else (`anyspec_cpu_kernels::RowBlocks` says why a gathered
//! product on the interleaved head cannot).

use std::sync::Arc;

use anyspec_cpu_kernels::{Matrix, RowBlocks};

/// A partition of a model's vocabulary into blocks, made by
/// [`Llama::head_blocks`](crate::Llama::head_blocks); a shortlist of whole blocks is then
/// [`Llama::pruned_head_blocks`](crate::Llama::pruned_head_blocks). Cheap to clone.
#[derive(Clone, Debug)]
pub struct HeadBlocks {
    pub(crate) members: Arc<Vec<Vec<u32>>>,
    pub(crate) vocab: usize,
    /// The native engine's ordered copy of the head, and the head it was copied from.
    pub(crate) native: Option<NativeBlocks>,
}

#[derive(Clone, Debug)]
pub(crate) struct NativeBlocks {
    pub(crate) rows: Arc<RowBlocks>,
    pub(crate) head: Arc<Matrix>,
}

/// The blocks a pruned head was made of (see [`HeadBlocks`]): its ids are the members of
/// `selected` in order, then `extra`.
#[derive(Clone, Debug)]
pub(crate) struct PickedBlocks {
    pub(crate) native: NativeBlocks,
    pub(crate) selected: Vec<u32>,
    pub(crate) extra: Vec<u32>,
}

impl HeadBlocks {
    /// The number of blocks.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there is no block.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The vocabulary ids of block `b` (`None` past the last), in the order a pruned head made
    /// of it lists them.
    pub fn members(&self, b: usize) -> Option<&[u32]> {
        self.members.get(b).map(Vec::as_slice)
    }

    /// Bytes of the ordered copy of the LM head (0 on the burn engine, which reads the rows in
    /// place).
    pub fn memory_bytes(&self) -> usize {
        self.native.as_ref().map_or(0, |n| n.rows.memory_bytes())
    }
}
