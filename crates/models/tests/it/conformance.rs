//! Our logits against transformers' at every prompt position: full forward, incremental
//! decoding, and k-token verification with rollbacks.

use anyspec_kernels::readback::read_rows;
use anyspec_models::Checkpoint;

use crate::common::{FIXTURES, every_engine, fixture_dir, load, max_abs_diff, reference};

const TOLERANCE: f32 = 1e-4;

#[test]
fn tokenizer_matches_the_reference_ids() {
    for name in FIXTURES {
        let tokenizer = Checkpoint::open(fixture_dir(name)).unwrap().tokenizer().unwrap();
        let ids = tokenizer.encode("The quick brown fox jumps over the lazy dog while speculative decoding").unwrap();
        assert_eq!(ids, reference(name).input_ids, "{name}");
    }
}

#[test]
fn full_forward_matches_transformers() {
    for (name, model) in every_engine() {
        let name = name.as_str();
        let engine = model.engine();
        let reference = reference(name);
        let mut cache = model.new_cache();
        let n = reference.input_ids.len();
        let logits = read_rows(model.forward(&reference.input_ids, &mut cache, n).unwrap()).unwrap();
        let diff = max_abs_diff(&logits, &reference.logits);
        assert!(diff <= TOLERANCE, "{name} on {engine}: max |Δ| = {diff}");
        assert_eq!(cache.len(), n);
    }
}

#[test]
fn incremental_decoding_matches_transformers() {
    for (name, model) in every_engine() {
        let name = name.as_str();
        let engine = model.engine();
        let reference = reference(name);
        let mut cache = model.new_cache();
        let mut rows = Vec::new();
        for &token in &reference.input_ids {
            rows.extend(read_rows(model.forward(&[token], &mut cache, 1).unwrap()).unwrap());
        }
        let diff = max_abs_diff(&rows, &reference.logits);
        assert!(diff <= TOLERANCE, "{name} on {engine}: max |Δ| = {diff}");
    }
}

#[test]
fn k_token_verification_with_rollback_matches_transformers() {
    for (name, model) in every_engine() {
        let name = name.as_str();
        let engine = model.engine();
        let reference = reference(name);
        let ids = &reference.input_ids;
        for k in [2, 3, 5, 8] {
            let mut cache = model.new_cache();
            let mut rows = vec![Vec::new(); ids.len()];
            // Prefill 4 tokens, then score k tokens at a time; after each pass roll back the last
            // two positions (a rejection) and rescore them with the next chunk.
            let prefill = read_rows(model.forward(&ids[..4], &mut cache, 4).unwrap()).unwrap();
            rows[..4].clone_from_slice(&prefill);
            let mut start = 4;
            while start < ids.len() {
                let end = (start + k).min(ids.len());
                let scored = read_rows(model.forward(&ids[start..end], &mut cache, end - start).unwrap()).unwrap();
                for (offset, row) in scored.into_iter().enumerate() {
                    rows[start + offset] = row;
                }
                if end == ids.len() {
                    break;
                }
                let rollback = if end - start > 2 { 2 } else { 0 };
                cache.truncate(end - rollback);
                start = end - rollback;
            }
            let diff = max_abs_diff(&rows, &reference.logits);
            assert!(diff <= TOLERANCE, "{name} on {engine}, k = {k}: max |Δ| = {diff}");
        }
    }
}

#[test]
fn native_verification_gives_the_logits_of_one_token_at_a_time_bit_for_bit() {
    // Greedy decoding with a drafter equals decoding without one only if scoring k drafted
    // tokens in one pass computes exactly the logits that k single steps would: the kernels,
    // and the attention of the query heads that share a key-value head (read together when a
    // pass has several rows), must not depend on how many rows a pass has.
    use crate::common::load_on;
    use anyspec_models::Engine;
    for name in FIXTURES {
        let model = load_on(name, Engine::Native);
        let ids = reference(name).input_ids;
        let mut cache = model.new_cache();
        let mut single = Vec::new();
        for &token in &ids {
            single.extend(read_rows(model.forward(&[token], &mut cache, 1).unwrap()).unwrap());
        }
        for k in [2, 3, 7] {
            let mut cache = model.new_cache();
            let mut scored = Vec::new();
            for chunk in ids.chunks(k) {
                scored.extend(read_rows(model.forward(chunk, &mut cache, chunk.len()).unwrap()).unwrap());
            }
            assert_eq!(scored.len(), single.len());
            for (position, (a, b)) in scored.iter().zip(&single).enumerate() {
                assert!(
                    a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{name}, k = {k}: position {position} differs from decoding one token at a time"
                );
            }
        }
    }
}

#[test]
fn sliding_window_matters_for_the_mistral_fixture() {
    // Guards the fixture itself: if the 5-token window did not change the logits, the Mistral
    // comparison above would not test the window at all.
    let model = load("mistral-window-f16");
    let reference = reference("mistral-window-f16");
    let mut config = model.config().clone();
    config.sliding_window = None;
    let device = anyspec_models::DeviceChoice::Cpu.device().unwrap();
    let unwindowed = anyspec_models::Llama::load(&fixture_dir("mistral-window-f16"), config, &device).unwrap();
    let mut cache = unwindowed.new_cache();
    let n = reference.input_ids.len();
    let logits = read_rows(unwindowed.forward(&reference.input_ids, &mut cache, n).unwrap()).unwrap();
    assert!(max_abs_diff(&logits, &reference.logits) > 1e-2);
}
