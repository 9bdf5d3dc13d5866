//! Tree attention: one pass over a token tree gives, at every node, the logits of an ordinary
//! forward pass over the cache followed by the node's path, and leaves the cache alone.

use anyspec_kernels::readback::read_rows;
use anyspec_models::{Error, Llama, Session, TreeNode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::{every_engine, load, max_abs_diff, reference};

const TOLERANCE: f32 = 1e-4;

/// A random tree of `n` nodes: each node hangs below the cached sequence or below an earlier
/// node, at most `max_depth` deep.
fn random_tree(n: usize, max_depth: usize, vocab: usize, rng: &mut StdRng) -> Vec<TreeNode> {
    let mut nodes: Vec<TreeNode> = Vec::with_capacity(n);
    let mut depths: Vec<usize> = Vec::with_capacity(n);
    for i in 0..n {
        let parent = if i == 0 || rng.random_bool(0.2) {
            None
        } else {
            Some(rng.random_range(0..i)).filter(|&p| depths[p] + 1 < max_depth)
        };
        depths.push(parent.map_or(0, |p| depths[p] + 1));
        nodes.push(TreeNode { token: rng.random_range(0..vocab as u32), parent });
    }
    nodes
}

/// The tokens from the root to node `i`.
fn path(nodes: &[TreeNode], i: usize) -> Vec<u32> {
    let mut tokens = Vec::new();
    let mut at = Some(i);
    while let Some(j) = at {
        tokens.push(nodes[j].token);
        at = nodes[j].parent;
    }
    tokens.reverse();
    tokens
}

/// The last-position logits of `prefix` followed by the path to each node, one ordinary pass
/// each on a fresh cache.
fn one_by_one(model: &Llama, prefix: &[u32], nodes: &[TreeNode]) -> Vec<Vec<f32>> {
    (0..nodes.len())
        .map(|i| {
            let mut sequence = prefix.to_vec();
            sequence.extend(path(nodes, i));
            let mut cache = model.new_cache();
            read_rows(model.forward(&sequence, &mut cache, 1).unwrap()).unwrap().remove(0)
        })
        .collect()
}

#[test]
fn every_node_matches_an_ordinary_pass_over_its_path() {
    // The mistral fixture has a sliding window of 5 tokens: with a 7-token prefix and depths up
    // to 5, windows cut through both the prefix and the tree.
    for (name, model) in every_engine() {
        let name = name.as_str();
        let engine = model.engine();
        let prefix = &reference(name).input_ids[..7];
        let mut rng = StdRng::seed_from_u64(7);
        for n in [1, 6, 20] {
            let nodes = random_tree(n, 5, model.config().vocab_size, &mut rng);
            let mut cache = model.new_cache();
            model.forward(prefix, &mut cache, 1).unwrap();
            let all: Vec<usize> = (0..n).collect();
            let tree = read_rows(model.forward_tree(&nodes, &all, &cache, None).unwrap()).unwrap();
            let diff = max_abs_diff(&tree, &one_by_one(&model, prefix, &nodes));
            assert!(diff <= TOLERANCE, "{name} on {engine}, {n} nodes: max |Δ| = {diff}");
            assert_eq!(cache.len(), prefix.len(), "{name} on {engine}: the tree must not enter the cache");
        }
    }
}

#[test]
fn the_reference_continuation_as_one_branch_matches_transformers() {
    // A tree whose main branch is the rest of the reference prompt, with decoy siblings at every
    // depth: the branch's rows are transformers' logits at those positions.
    for (name, model) in every_engine() {
        let name = name.as_str();
        let engine = model.engine();
        let reference = reference(name);
        let ids = &reference.input_ids;
        let split = 4;
        let mut nodes = Vec::new();
        let mut branch = Vec::new();
        let mut parent = None;
        for (depth, &token) in ids[split..].iter().enumerate() {
            nodes.push(TreeNode { token: (token + 1 + depth as u32) % 320, parent });
            nodes.push(TreeNode { token, parent });
            parent = Some(nodes.len() - 1);
            branch.push(nodes.len() - 1);
        }
        let mut cache = model.new_cache();
        model.forward(&ids[..split], &mut cache, 1).unwrap();
        let rows = read_rows(model.forward_tree(&nodes, &branch, &cache, None).unwrap()).unwrap();
        let diff = max_abs_diff(&rows, &reference.logits[split..]);
        assert!(diff <= TOLERANCE, "{name} on {engine}: max |Δ| = {diff}");
    }
}

#[test]
fn a_pruned_head_keeps_the_same_columns() {
    let model = load("llama3-gqa");
    let prefix = &reference("llama3-gqa").input_ids[..5];
    let nodes = random_tree(10, 4, model.config().vocab_size, &mut StdRng::seed_from_u64(3));
    let kept = [0u32, 17, 42, 319, 5];
    let head = model.pruned_head(&kept).unwrap();
    let rows = [9usize, 0, 4];
    let mut session = Session::new(model.clone());
    let pruned = session.tree_logits_on_host(prefix, &nodes, &rows, Some(&head)).unwrap();
    let full = session.tree_logits_on_host(prefix, &nodes, &rows, None).unwrap();
    for (p, f) in pruned.iter().zip(&full) {
        let picked: Vec<f32> = kept.iter().map(|&k| f[k as usize]).collect();
        assert!(max_abs_diff(std::slice::from_ref(p), &[picked]) <= TOLERANCE);
    }
    // The session holds exactly the prefix afterwards, and ordinary passes still agree.
    assert_eq!(session.cached_tokens(), prefix);
    let expected = one_by_one(&model, prefix, &nodes);
    let picked: Vec<Vec<f32>> = rows.iter().map(|&r| expected[r].clone()).collect();
    assert!(max_abs_diff(&full, &picked) <= TOLERANCE);
}

#[test]
fn malformed_trees_are_clear_errors() {
    let model = load("llama3-gqa");
    let cache = model.new_cache();
    let child_first = [TreeNode { token: 1, parent: Some(1) }, TreeNode { token: 2, parent: None }];
    let message = |e: Error| e.to_string();
    let err = message(model.forward_tree(&child_first, &[0], &cache, None).unwrap_err());
    assert!(err.contains("parent must come before"), "{err}");
    let one = [TreeNode { token: 1, parent: None }];
    let err = message(model.forward_tree(&one, &[1], &cache, None).unwrap_err());
    assert!(err.contains("node 1 of a tree of 1 nodes"), "{err}");
    let err = message(model.forward_tree(&[TreeNode { token: 9999, parent: None }], &[0], &cache, None).unwrap_err());
    assert!(err.contains("9999"), "{err}");
    assert!(model.forward_tree(&[], &[0], &cache, None).is_err());
    // A tree deeper than the context window has room for.
    let deep: Vec<TreeNode> =
        (0..200).map(|i| TreeNode { token: 1, parent: if i == 0 { None } else { Some(i - 1) } }).collect();
    assert!(matches!(
        model.forward_tree(&deep, &[199], &cache, None),
        Err(Error::ContextFull { needed: 200, max: 128 })
    ));
}

#[test]
fn a_tree_grown_level_by_level_matches_one_pass_over_the_whole_tree() {
    for (name, model) in every_engine() {
        let name = name.as_str();
        let engine = model.engine();
        let prefix = &reference(name).input_ids[..7];
        let nodes = random_tree(24, 5, model.config().vocab_size, &mut StdRng::seed_from_u64(11));
        let mut cache = model.new_cache();
        model.forward(prefix, &mut cache, 1).unwrap();
        // The nodes in three uneven batches, parents always in an earlier or the same batch.
        let mut tree = model.new_tree_cache();
        for range in [0..1, 1..9, 9..24] {
            model.extend_tree(&nodes[range], &cache, &mut tree).unwrap();
        }
        assert_eq!(tree.len(), nodes.len());
        let all: Vec<usize> = (0..nodes.len()).collect();
        let grown = read_rows(model.tree_logits(&tree, &all, None).unwrap()).unwrap();
        let diff = max_abs_diff(&grown, &one_by_one(&model, prefix, &nodes));
        assert!(diff <= TOLERANCE, "{name} on {engine}: max |Δ| = {diff}");
        // A tree grown below another cache length is refused, not silently misread.
        model.forward(&[1], &mut cache, 1).unwrap();
        let err = model.extend_tree(&[TreeNode { token: 1, parent: Some(0) }], &cache, &mut tree).unwrap_err();
        assert!(err.to_string().contains("clear the tree"), "{err}");
    }
}

#[test]
fn a_session_reuses_nodes_across_renumbered_requests_and_forgets_them_when_the_prefix_changes() {
    let model = load("mistral-window-f16");
    let ids = reference("mistral-window-f16").input_ids;
    let node = |token, parent| TreeNode { token, parent };
    let mut session = Session::new(model.clone());
    // Level 1, then level 2 numbered differently (children listed before a second root).
    let level1 = [node(5, None), node(9, None)];
    let level2 = [node(9, None), node(5, None), node(3, Some(1)), node(4, Some(0)), node(8, Some(1))];
    let prefix = &ids[..6];
    let a = session.tree_logits_on_host(prefix, &level1, &[0, 1], None).unwrap();
    let b = session.tree_logits_on_host(prefix, &level2, &[1, 0, 2, 3, 4], None).unwrap();
    let expected = one_by_one(&model, prefix, &level2);
    let want = |rows: &[usize]| rows.iter().map(|&r| expected[r].clone()).collect::<Vec<_>>();
    assert!(max_abs_diff(&a, &want(&[1, 0])) <= TOLERANCE);
    assert!(max_abs_diff(&b, &want(&[1, 0, 2, 3, 4])) <= TOLERANCE);
    // Another prefix: the same node numbers now mean other paths.
    let other = &ids[..8];
    let c = session.tree_logits_on_host(other, &level2, &[2, 4], None).unwrap();
    let expected = one_by_one(&model, other, &level2);
    assert!(max_abs_diff(&c, &[expected[2].clone(), expected[4].clone()]) <= TOLERANCE);
    assert_eq!(session.cached_tokens(), other);
    // A malformed request is an error and leaves the session usable.
    assert!(session.tree_logits_on_host(other, &[node(1, Some(3))], &[0], None).is_err());
    let d = session.tree_logits_on_host(other, &level2, &[4], None).unwrap();
    assert!(max_abs_diff(&d, &[expected[4].clone()]) <= TOLERANCE);
}

#[test]
fn a_tree_larger_than_one_pass_is_run_in_chunks_with_the_same_logits() {
    // Over a thousand nodes: the session runs them (and reads their rows) in several passes.
    let model = load("llama3-gqa");
    let prefix = &reference("llama3-gqa").input_ids[..5];
    let nodes = random_tree(2500, 6, model.config().vocab_size, &mut StdRng::seed_from_u64(5));
    let sample: Vec<usize> = (0..nodes.len()).step_by(97).chain([nodes.len() - 1]).collect();
    let mut session = Session::new(model.clone());
    let all: Vec<usize> = (0..nodes.len()).collect();
    let rows = session.tree_logits_on_host(prefix, &nodes, &all, None).unwrap();
    assert_eq!(rows.len(), nodes.len());
    let got: Vec<Vec<f32>> = sample.iter().map(|&i| rows[i].clone()).collect();
    let want: Vec<Vec<f32>> = sample
        .iter()
        .map(|&i| {
            let sequence: Vec<u32> = prefix.iter().copied().chain(path(&nodes, i)).collect();
            read_rows(model.forward(&sequence, &mut model.new_cache(), 1).unwrap()).unwrap().remove(0)
        })
        .collect();
    assert!(max_abs_diff(&got, &want) <= TOLERANCE);
}
