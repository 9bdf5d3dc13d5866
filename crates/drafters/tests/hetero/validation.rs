//! Bridges that cannot work for a pair are refused before any generation starts.

use anyspec_core::projection::{ABSENT, AffinityMatrix, IdMap};
use anyspec_drafters::{Bridge, Error, HeteroConfig, HeteroModelDrafter, RdkForm};

use crate::fixtures::{MarkovDrafterModel, drafter_dir, id_map, target_dir, tokenizer};

fn build(config: HeteroConfig, map: IdMap) -> Result<HeteroModelDrafter<MarkovDrafterModel>, Error> {
    HeteroModelDrafter::with_model(
        MarkovDrafterModel::new(322, &[0, 1], 0),
        config,
        map,
        tokenizer(&target_dir()),
        tokenizer(&drafter_dir()),
        320,
    )
}

fn message(result: Result<HeteroModelDrafter<MarkovDrafterModel>, Error>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn tli_with_an_empty_intersection_is_refused_and_names_slem() {
    let empty = IdMap::new(vec![ABSENT; 322], 320).unwrap();
    let msg = message(build(HeteroConfig::new(Bridge::Tli), empty));
    assert!(msg.contains("tli") && msg.contains("share no token") && msg.contains("slem"), "{msg}");
}

#[test]
fn an_affinity_matrix_of_another_size_is_refused() {
    let m = AffinityMatrix::from_csr(10, vec![0; 11], vec![], vec![]).unwrap();
    let msg = message(build(HeteroConfig::new(Bridge::Rdk(RdkForm::Exact(m))), id_map()));
    assert!(msg.contains("10 × 10") && msg.contains("320"), "{msg}");
}

#[test]
fn a_shortlist_with_union_or_without_shared_tokens_is_refused() {
    let mut config = HeteroConfig::new(Bridge::Union);
    config.shortlist = Some(vec![1, 2]);
    assert!(message(build(config, id_map())).contains("takes no shortlist"));
    let mut config = HeteroConfig::new(Bridge::Tli);
    // 256 and 257 are the drafter's <s> and </s>: special, never in a bytes-mode map.
    config.shortlist = Some(vec![256, 257]);
    assert!(message(build(config, id_map())).contains("shortlist keeps no token"));
}

#[test]
fn a_map_wider_than_the_target_model_is_refused() {
    let map = IdMap::identity(322);
    let wide = IdMap::new(map.drafter_to_target().to_vec(), 400).unwrap();
    let msg = message(build(HeteroConfig::new(Bridge::Tli), wide));
    assert!(msg.contains("400") && msg.contains("320"), "{msg}");
}

#[test]
fn a_look_behind_window_of_zero_is_refused() {
    let config = HeteroConfig { lookbehind: 0, ..HeteroConfig::new(Bridge::Tli) };
    let msg = message(build(config, id_map()));
    assert!(msg.contains("lookbehind") && msg.contains("≥ 1"), "{msg}");
}
